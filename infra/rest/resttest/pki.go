package resttest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contiv-ipam/agent/infra/rest"
)

// BasicAuth is the header of HTTP basic authentication with user and pass,
// for Server.Do.
func BasicAuth(user, pass string) http.Header {
	return http.Header{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))}}
}

// PKI is a certificate authority that lives for one test, with a server
// certificate for 127.0.0.1 and the PEM files a rest.Config names.
type PKI struct {
	t      testing.TB
	ca     *x509.Certificate
	key    *ecdsa.PrivateKey
	serial atomic.Int64
	// CAFile, ServerCertFile and ServerKeyFile are PEM files in a
	// temporary directory of the test.
	CAFile, ServerCertFile, ServerKeyFile string
}

// NewPKI creates the CA and the server certificate; it fails the test on
// error.
func NewPKI(t testing.TB) *PKI {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "resttest CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("resttest: CA certificate: %v", err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("resttest: CA certificate: %v", err)
	}
	p := &PKI{t: t, ca: ca, key: key}
	p.serial.Store(1)
	dir := t.TempDir()
	p.CAFile = writePEM(t, dir, "ca.crt", "CERTIFICATE", der)
	cert, k := p.issue("agent", x509.ExtKeyUsageServerAuth)
	p.ServerCertFile = writePEM(t, dir, "server.crt", "CERTIFICATE", cert.Certificate[0])
	keyDER, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatalf("resttest: server key: %v", err)
	}
	p.ServerKeyFile = writePEM(t, dir, "server.key", "EC PRIVATE KEY", keyDER)
	return p
}

// MutualTLS sets c's HTTPS keys: the server certificate, and client
// certificates signed by the CA required (the probe paths aside).
func (p *PKI) MutualTLS(c rest.Config) rest.Config {
	c.ServerCertFile, c.ServerKeyFile = p.ServerCertFile, p.ServerKeyFile
	c.ClientCertFiles = []string{p.CAFile}
	return c
}

// Client is an HTTPS client that trusts the CA and presents a client
// certificate with subject common name cn ("" presents none).
func (p *PKI) Client(cn string) *http.Client {
	p.t.Helper()
	roots := x509.NewCertPool()
	roots.AddCert(p.ca)
	tc := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if cn != "" {
		cert, _ := p.issue(cn, x509.ExtKeyUsageClientAuth)
		tc.Certificates = []tls.Certificate{cert}
	}
	return &http.Client{Timeout: requestTimeout, Transport: &http.Transport{TLSClientConfig: tc}}
}

// issue signs a leaf certificate for 127.0.0.1.
func (p *PKI) issue(cn string, usage x509.ExtKeyUsage) (tls.Certificate, *ecdsa.PrivateKey) {
	p.t.Helper()
	key := newKey(p.t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial.Add(1)),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.key)
	if err != nil {
		p.t.Fatalf("resttest: certificate of %q: %v", cn, err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, key
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("resttest: key: %v", err)
	}
	return key
}

func writePEM(t testing.TB, dir, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatalf("resttest: %v", err)
	}
	return path
}
