package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// testPKI is a CA with a server certificate for 127.0.0.1 and a client
// certificate, as PEM files.
type testPKI struct {
	caFile, clientCert, clientKey string
	pool                          *x509.CertPool
	server                        tls.Certificate
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	dir := t.TempDir()
	caKey := genKey(t)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "netctl test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	issue := func(serial int64, cn string, usage x509.ExtKeyUsage) ([]byte, *ecdsa.PrivateKey) {
		key := genKey(t)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, key
	}
	p := &testPKI{pool: x509.NewCertPool()}
	p.pool.AddCert(ca)
	p.caFile = writePEM(t, dir, "ca.pem", "CERTIFICATE", caDER)
	srvDER, srvKey := issue(2, "agent", x509.ExtKeyUsageServerAuth)
	p.server = tls.Certificate{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}
	cliDER, cliKey := issue(3, "netops", x509.ExtKeyUsageClientAuth)
	p.clientCert = writePEM(t, dir, "client.pem", "CERTIFICATE", cliDER)
	keyDER, err := x509.MarshalECPrivateKey(cliKey)
	if err != nil {
		t.Fatal(err)
	}
	p.clientKey = writePEM(t, dir, "client-key.pem", "EC PRIVATE KEY", keyDER)
	return p
}

func genKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func writePEM(t *testing.T, dir, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// mutualTLSAgent is a fake agent over HTTPS that requires a client
// certificate of the PKI.
func mutualTLSAgent(t *testing.T, p *testPKI) *fakeAgent {
	t.Helper()
	f := newFakeTLSAgent(t)
	f.TLS = &tls.Config{Certificates: []tls.Certificate{p.server}, ClientAuth: tls.RequireAndVerifyClientCert,
		ClientCAs: p.pool, MinVersion: tls.VersionTLS12}
	f.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are the point
	f.StartTLS()
	return f
}

func TestMutualTLS(t *testing.T) {
	p := newTestPKI(t)
	f := mutualTLSAgent(t, p)
	export := []string{"ipam", "checkpoint", "export"}
	for _, tc := range []struct {
		name  string
		flags []string
		code  int
		msg   string
	}{
		{"CA and client certificate", []string{"-cacert", p.caFile, "-cert", p.clientCert, "-key", p.clientKey}, exitOK, ""},
		{"no CA", []string{"-cert", p.clientCert, "-key", p.clientKey}, exitError,
			"certificate signed by unknown authority (give the CA that signed the server's certificate with -cacert)"},
		{"no client certificate", []string{"-cacert", p.caFile}, exitError, "(the server wants a client certificate: give -cert and -key)"},
		{"missing CA file", []string{"-cacert", filepath.Join(t.TempDir(), "none.pem")}, exitError, "-cacert: open "},
		{"CA file not PEM", []string{"-cacert", p.clientKey}, exitError, "-cacert " + p.clientKey + ": no PEM certificate in the file"},
		{"key of another certificate", []string{"-cacert", p.caFile, "-cert", p.clientCert, "-key", p.caFile}, exitError, "-cert " + p.clientCert + ", -key " + p.caFile + ": "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			res := netctl(t, nil, "", args(append([]string{"-server", f.URL}, tc.flags...), export...)...)
			g.Expect(res.code).To(Equal(tc.code), res.stderr)
			if tc.code == exitOK {
				g.Expect(res.stdout).To(Equal(sampleDoc))
				return
			}
			g.Expect(res.stderr).To(HavePrefix("contiv-netctl: "))
			g.Expect(res.stderr).To(ContainSubstring(tc.msg))
		})
	}
}
