//go:build node

package node

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"os"
	"time"
)

// The node has no kube-proxy and no cluster DNS; Deploy stands in for
// both, inside the node's network namespace only: each Service's cluster
// IP becomes an address of the namespace's loopback, where a listener of
// the test serves the Service's port (a Bridge to its endpoint, or, for
// the API server, apiServerProxy), and the Service's DNS names are
// hostAliases of the pod-network pods. A pod of the pod network reaches
// the cluster IP through its route to the node (ptp's veth), a
// host-network pod on the namespace's own loopback, as through
// kube-proxy's rules on a real node.

// apiServerProxy serves the kubernetes Service inside the node's
// namespace. In-cluster clients (contiv-ksr) dial
// KUBERNETES_SERVICE_HOST:PORT, the Service's cluster IP, and verify the
// server's certificate for that address with the ca.crt of their service
// account; the API server's own certificate names only 127.0.0.1 and
// localhost. So the proxy terminates TLS with a certificate of its own
// CA for the cluster IP (the CA goes into the service account's ca.crt)
// and forwards every request to the API server unchanged, with the
// client's bearer token: the API server authenticates and authorizes the
// service account itself (RBAC), as it would behind kube-proxy.
type apiServerProxy struct {
	// CA is the PEM of the CA of the proxy's certificate.
	CA []byte

	srv  *http.Server
	log  *os.File
	done chan error
}

// startAPIServerProxy listens on listen inside netns and forwards to the
// API server at upstream (its URL) trusting upstreamCA (PEM); its errors
// go to logFile.
func startAPIServerProxy(netns string, listen netip.AddrPort, upstream string, upstreamCA []byte, logFile string) (*apiServerProxy, error) {
	target, err := url.Parse(upstream)
	if err != nil {
		return nil, fmt.Errorf("API server address %q: %w", upstream, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(upstreamCA) {
		return nil, errors.New("API server CA: no certificate in the PEM")
	}
	caPEM, cert, err := servingCert(listen.Addr(), "kubernetes", "kubernetes.default", "kubernetes.default.svc",
		"kubernetes.default.svc.cluster.local")
	if err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(logFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	errorLog := log.New(logf, "", log.LstdFlags|log.Lmicroseconds)
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true,
			DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext, TLSHandshakeTimeout: 5 * time.Second},
		FlushInterval: -1, // watches stream
		ErrorLog:      errorLog,
	}
	ln, err := ListenIn(netns, listen.String())
	if err != nil {
		_ = logf.Close()
		return nil, err
	}
	p := &apiServerProxy{CA: caPEM, log: logf, done: make(chan error, 1),
		srv: &http.Server{Handler: rp, ErrorLog: errorLog, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}}
	go func() { p.done <- p.srv.ServeTLS(ln, "", "") }()
	return p, nil
}

// Close stops the proxy and its connections.
func (p *apiServerProxy) Close() error {
	err := p.srv.Close()
	if serr := <-p.done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return errors.Join(err, p.log.Close())
}

// servingCert makes a CA and a server certificate it signs for ip and
// names, valid for a day; it returns the CA's PEM and the certificate.
func servingCert(ip netip.Addr, names ...string) ([]byte, tls.Certificate, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "contiv-node service CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IPAddresses: []net.IP{ip.AsSlice()},
		DNSNames: names, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
