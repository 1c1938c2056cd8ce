package rest

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// serverTLS loads the certificates named by c. It returns nil when c does
// not ask for HTTPS.
func serverTLS(c *Config) (*tls.Config, error) {
	if !c.TLS() {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(c.ServerCertFile, c.ServerKeyFile)
	if err != nil {
		return nil, fmt.Errorf("server-cert-file %q, server-key-file %q: %w", c.ServerCertFile, c.ServerKeyFile, err)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if len(c.ClientCertFiles) == 0 {
		return tc, nil
	}
	pool := x509.NewCertPool()
	for _, f := range c.ClientCertFiles {
		pem, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("client-cert-files: %w", err)
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("client-cert-files: %q holds no PEM certificate", f)
		}
	}
	tc.ClientCAs = pool
	// A certificate given must verify (else the handshake fails), but none
	// is required here: the kubelet's probes send none. authGate requires
	// a verified one on every request except the probes (ProbePaths).
	tc.ClientAuth = tls.VerifyClientCertIfGiven
	return tc, nil
}
