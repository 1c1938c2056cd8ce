package rest_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// testCA is a certificate authority that lives for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newCA(t *testing.T, name string) *testCA {
	t.Helper()
	g := NewWithT(t)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	g.Expect(err).NotTo(HaveOccurred())
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	g.Expect(err).NotTo(HaveOccurred())
	cert, err := x509.ParseCertificate(der)
	g.Expect(err).NotTo(HaveOccurred())
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue signs a leaf certificate for usage and returns it as PEM cert and key.
func (ca *testCA) issue(t *testing.T, name string, serial int64, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
	t.Helper()
	g := NewWithT(t)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	g.Expect(err).NotTo(HaveOccurred())
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	g.Expect(err).NotTo(HaveOccurred())
	keyDER, err := x509.MarshalECPrivateKey(key)
	g.Expect(err).NotTo(HaveOccurred())
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	NewWithT(t).Expect(os.WriteFile(p, data, 0o600)).To(Succeed())
	return p
}

// tlsClient trusts serverCA and presents the client certificate when
// given, whatever CAs the server names (as curl --cert does).
func tlsClient(t *testing.T, serverCA *testCA, certPEM, keyPEM []byte) *http.Client {
	t.Helper()
	cl := tlsClientPickingByCA(t, serverCA, certPEM, keyPEM)
	tc := cl.Transport.(*http.Transport).TLSClientConfig
	if len(tc.Certificates) > 0 {
		pair := tc.Certificates[0]
		tc.Certificates = nil
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
	}
	return cl
}

// tlsClientPickingByCA is tlsClient with crypto/tls's default choice: the
// certificate is sent only when the server names the CA that signed it,
// and the client sends none otherwise.
func tlsClientPickingByCA(t *testing.T, serverCA *testCA, certPEM, keyPEM []byte) *http.Client {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AddCert(serverCA.cert)
	tc := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if certPEM != nil {
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		tc.Certificates = []tls.Certificate{pair}
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
}

func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	serverCA, clientCA, otherCA := newCA(t, "server CA"), newCA(t, "client CA"), newCA(t, "other CA")
	srvCert, srvKey := serverCA.issue(t, "agent", 2, x509.ExtKeyUsageServerAuth)
	goodCert, goodKey := clientCA.issue(t, "netctl", 3, x509.ExtKeyUsageClientAuth)
	badCert, badKey := otherCA.issue(t, "intruder", 4, x509.ExtKeyUsageClientAuth)
	serverOnlyCert, serverOnlyKey := clientCA.issue(t, "not-a-client", 5, x509.ExtKeyUsageServerAuth)

	c := loopback()
	c.ServerCertFile = writeFile(t, dir, "server.crt", srvCert)
	c.ServerKeyFile = writeFile(t, dir, "server.key", srvKey)
	c.ClientCertFiles = []string{writeFile(t, dir, "clients-ca.crt", clientCA.pem)}
	p := started(t, c)
	p.RegisterHTTPHandler("/secure", hello)
	registerProbes(p)
	base := "https://" + p.Addr()

	// status per path; 0 means the TLS handshake fails.
	cases := []struct {
		name      string
		cert, key []byte
		pickByCA  bool // crypto/tls's default: send the certificate only if the server names its CA
		want      map[string]int
	}{
		{name: "client without certificate", want: map[string]int{
			"/secure": http.StatusForbidden, "/": http.StatusForbidden,
			"/liveness": http.StatusOK, "/readiness": http.StatusOK}},
		{name: "client certificate from another CA", cert: badCert, key: badKey, want: map[string]int{
			"/secure": 0, "/": 0, "/liveness": 0, "/readiness": 0}},
		{name: "client certificate of the configured CA without client usage", cert: serverOnlyCert, key: serverOnlyKey,
			want: map[string]int{"/secure": 0, "/liveness": 0}},
		{name: "client that withholds its certificate of another CA", cert: badCert, key: badKey, pickByCA: true, want: map[string]int{
			"/secure": http.StatusForbidden, "/liveness": http.StatusOK}},
		{name: "client certificate from the configured CA", cert: goodCert, key: goodKey, want: map[string]int{
			"/secure": http.StatusOK, "/": http.StatusOK, "/liveness": http.StatusOK, "/readiness": http.StatusOK}},
		{name: "client that picks its certificate of the configured CA", cert: goodCert, key: goodKey, pickByCA: true, want: map[string]int{
			"/secure": http.StatusOK}},
	}
	for _, tc := range cases {
		for path, want := range tc.want {
			t.Run(tc.name+" GET "+path, func(t *testing.T) {
				g := NewWithT(t)
				cl := tlsClient(t, serverCA, tc.cert, tc.key)
				if tc.pickByCA {
					cl = tlsClientPickingByCA(t, serverCA, tc.cert, tc.key)
				}
				defer cl.CloseIdleConnections()
				req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+path, nil)
				g.Expect(err).NotTo(HaveOccurred())
				resp, err := cl.Do(req)
				if want == 0 {
					g.Expect(err).To(MatchError(ContainSubstring("remote error: tls: ")), "the server refuses the handshake")
					return
				}
				g.Expect(err).NotTo(HaveOccurred())
				defer func() { _ = resp.Body.Close() }()
				g.Expect(resp.StatusCode).To(Equal(want))
				g.Expect(resp.TLS).NotTo(BeNil())
			})
		}
	}
	t.Run("plain HTTP is not served", func(t *testing.T) {
		g := NewWithT(t)
		status, _, _ := get(t, client(), "http://"+p.Addr()+"/secure", nil)
		g.Expect(status).To(Equal(http.StatusBadRequest))
	})
}

func TestServerTLSWithoutClientCerts(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	ca := newCA(t, "server CA")
	srvCert, srvKey := ca.issue(t, "agent", 2, x509.ExtKeyUsageServerAuth)
	c := loopback()
	c.ServerCertFile = writeFile(t, dir, "server.crt", srvCert)
	c.ServerKeyFile = writeFile(t, dir, "server.key", srvKey)
	p := started(t, c)
	g.Expect(p.TLS()).To(BeTrue())
	cl := tlsClient(t, ca, nil, nil)
	defer cl.CloseIdleConnections()
	status, _, _ := get(t, cl, "https://"+p.Addr()+"/", nil)
	g.Expect(status).To(Equal(http.StatusOK))
}

func TestBadClientCAFile(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	ca := newCA(t, "server CA")
	srvCert, srvKey := ca.issue(t, "agent", 2, x509.ExtKeyUsageServerAuth)
	c := loopback()
	c.ServerCertFile = writeFile(t, dir, "server.crt", srvCert)
	c.ServerKeyFile = writeFile(t, dir, "server.key", srvKey)
	notPEM := writeFile(t, dir, "ca.txt", []byte("not a certificate"))
	c.ClientCertFiles = []string{notPEM}
	p := newPlugin(c)
	g.Expect(p.Init()).To(MatchError(ContainSubstring(notPEM)))
}
