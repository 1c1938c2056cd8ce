package rest_test

import (
	"io"
	"net/http"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/rest"
	"github.com/contiv-ipam/agent/infra/rest/resttest"
)

// probe answers what the server told the handler about the client.
func probe(f *rest.Formatter) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c := rest.ClientOf(r)
		f.JSON(w, http.StatusOK, map[string]any{"anonymous": rest.Anonymous(r), "user": c.User, "cn": c.CertCN})
	}
}

// registerProbes serves probe at both probe paths, as the health plugin
// does (GET only).
func registerProbes(p *rest.Plugin) {
	for _, path := range rest.ProbePaths() {
		p.RegisterHTTPHandler(path, probe)
	}
}

// do sends one request with cl and returns status, body and headers.
func do(t *testing.T, cl *http.Client, method, url string, header http.Header) (int, string, http.Header) {
	t.Helper()
	g := NewWithT(t)
	req, err := http.NewRequestWithContext(t.Context(), method, url, nil)
	g.Expect(err).NotTo(HaveOccurred())
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := cl.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	return resp.StatusCode, string(body), resp.Header
}

func TestProbePathsAreFixed(t *testing.T) {
	g := NewWithT(t)
	g.Expect(rest.ProbePaths()).To(Equal([]string{"/liveness", "/readiness"}))
}

// With client-basic-auth the probes answer without credentials; every
// other request still needs them.
func TestBasicAuthLeavesTheProbesOpen(t *testing.T) {
	c := loopback()
	c.ClientBasicAuth = []string{"admin:s3cret"}
	p := started(t, c)
	registerProbes(p)
	p.RegisterHTTPHandler("/private", hello)
	p.RegisterHTTPHandler("/private/{name}", hello, http.MethodGet, http.MethodPost)
	base := "http://" + p.Addr()
	admin, wrong := resttest.BasicAuth("admin", "s3cret"), resttest.BasicAuth("admin", "guess")

	cases := []struct {
		name         string
		method, path string
		header       http.Header
		status       int
		body         string // JSON, when the probe answers
	}{
		{name: "liveness without credentials", method: http.MethodGet, path: "/liveness",
			status: http.StatusOK, body: `{"anonymous": true, "user": "", "cn": ""}`},
		{name: "readiness without credentials", method: http.MethodGet, path: "/readiness",
			status: http.StatusOK, body: `{"anonymous": true, "user": "", "cn": ""}`},
		{name: "HEAD of liveness without credentials", method: http.MethodHead, path: "/liveness", status: http.StatusOK},
		{name: "liveness with credentials", method: http.MethodGet, path: "/liveness", header: admin,
			status: http.StatusOK, body: `{"anonymous": false, "user": "admin", "cn": ""}`},
		{name: "liveness with a wrong password is anonymous", method: http.MethodGet, path: "/liveness", header: wrong,
			status: http.StatusOK, body: `{"anonymous": true, "user": "", "cn": ""}`},
		{name: "readiness with a query", method: http.MethodGet, path: "/readiness?verbose=1",
			status: http.StatusOK, body: `{"anonymous": true, "user": "", "cn": ""}`},

		{name: "another path", method: http.MethodGet, path: "/private", status: http.StatusUnauthorized},
		{name: "another path, wrong password", method: http.MethodGet, path: "/private", header: wrong, status: http.StatusUnauthorized},
		{name: "the index", method: http.MethodGet, path: "/", status: http.StatusUnauthorized},
		{name: "an unknown path", method: http.MethodGet, path: "/nothing", status: http.StatusUnauthorized},
		{name: "POST to a probe path", method: http.MethodPost, path: "/liveness", status: http.StatusUnauthorized},
		{name: "PUT to a probe path", method: http.MethodPut, path: "/readiness", status: http.StatusUnauthorized},
		{name: "a probe path with a trailing slash", method: http.MethodGet, path: "/liveness/", status: http.StatusUnauthorized},
		{name: "a probe path with a double slash", method: http.MethodGet, path: "//liveness", status: http.StatusUnauthorized},
		{name: "a path that cleans to a probe", method: http.MethodGet, path: "/private/../liveness", status: http.StatusUnauthorized},
		{name: "a probe name below another path", method: http.MethodGet, path: "/private/liveness", status: http.StatusUnauthorized},
		{name: "another path with credentials", method: http.MethodGet, path: "/private", header: admin, status: http.StatusOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			status, body, header := do(t, client(), tc.method, base+tc.path, tc.header)
			g.Expect(status).To(Equal(tc.status), body)
			if tc.status == http.StatusUnauthorized {
				g.Expect(header.Get("WWW-Authenticate")).To(HavePrefix(`Basic realm="contiv-agent"`))
				g.Expect(body).To(MatchJSON(`{"error": "authentication required"}`))
			}
			if tc.body != "" {
				g.Expect(body).To(MatchJSON(tc.body))
			}
		})
	}
	t.Run("Authenticates keeps its meaning", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(rest.Authenticates(p)).To(BeTrue())
	})
}

// The exemption covers the GET handler registered at a probe path and
// nothing else: not a wildcard that would answer the path, not another
// method registered there.
func TestProbeExemptionNeedsAProbeHandler(t *testing.T) {
	g := NewWithT(t)
	c := loopback()
	c.ClientBasicAuth = []string{"admin:s3cret"}
	p := started(t, c)
	p.RegisterHTTPHandler("/{name}", hello)
	p.RegisterHTTPHandler("/readiness", hello, http.MethodPost)
	base := "http://" + p.Addr()
	for _, req := range []struct{ method, path string }{
		{http.MethodGet, "/liveness"},
		{http.MethodGet, "/readiness"},
		{http.MethodPost, "/readiness"},
	} {
		status, body, _ := do(t, client(), req.method, base+req.path, nil)
		g.Expect(status).To(Equal(http.StatusUnauthorized), "%s %s: %s", req.method, req.path, body)
	}
	status, body, _ := do(t, client(), http.MethodGet, base+"/liveness", resttest.BasicAuth("admin", "s3cret"))
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(body).To(Equal("hello"), "the wildcard serves an authenticated client")
}

// A server that authenticates nobody marks nobody anonymous: every
// endpoint is equally open there.
func TestNoAuthenticationMeansNoAnonymousProbe(t *testing.T) {
	g := NewWithT(t)
	p := started(t, loopback())
	registerProbes(p)
	status, body, _ := do(t, client(), http.MethodGet, "http://"+p.Addr()+"/liveness", nil)
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(body).To(MatchJSON(`{"anonymous": false, "user": "", "cn": ""}`))
}

// With client certificates and basic auth together, a request needs both,
// the certificate first (403 without it, even with the right password);
// the probes need neither.
func TestClientCertificateAndBasicAuthTogether(t *testing.T) {
	pki := resttest.NewPKI(t)
	c := pki.MutualTLS(loopback())
	c.ClientBasicAuth = []string{"admin:s3cret"}
	p := started(t, c)
	registerProbes(p)
	p.RegisterHTTPHandler("/who", whoAmI)
	base := "https://" + p.Addr()
	withCert, noCert := pki.Client("netctl"), pki.Client("")
	t.Cleanup(withCert.CloseIdleConnections)
	t.Cleanup(noCert.CloseIdleConnections)
	admin := resttest.BasicAuth("admin", "s3cret")

	cases := []struct {
		name   string
		client *http.Client
		path   string
		header http.Header
		status int
		body   string
	}{
		{name: "no certificate, right password", client: noCert, path: "/who", header: admin, status: http.StatusForbidden,
			body: `{"error": "a client certificate is required: one signed by a CA of the server's client-cert-files"}`},
		{name: "certificate, no password", client: withCert, path: "/who", status: http.StatusUnauthorized,
			body: `{"error": "authentication required"}`},
		{name: "certificate and password", client: withCert, path: "/who", header: admin, status: http.StatusOK},
		{name: "probe with neither", client: noCert, path: "/readiness", status: http.StatusOK,
			body: `{"anonymous": true, "user": "", "cn": ""}`},
		{name: "probe with a certificate only", client: withCert, path: "/liveness", status: http.StatusOK,
			body: `{"anonymous": true, "user": "", "cn": "netctl"}`},
		{name: "probe with both", client: withCert, path: "/liveness", header: admin, status: http.StatusOK,
			body: `{"anonymous": false, "user": "admin", "cn": "netctl"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			status, body, header := do(t, tc.client, http.MethodGet, base+tc.path, tc.header)
			g.Expect(status).To(Equal(tc.status), body)
			if tc.body != "" {
				g.Expect(body).To(MatchJSON(tc.body))
			}
			if tc.status == http.StatusForbidden {
				g.Expect(header.Get("WWW-Authenticate")).To(BeEmpty(), "a password cannot replace the certificate")
			}
		})
	}
	t.Run("who asked", func(t *testing.T) {
		g := NewWithT(t)
		_, body, _ := do(t, withCert, http.MethodGet, base+"/who", admin)
		g.Expect(body).To(ContainSubstring(`"user": "admin"`))
		g.Expect(body).To(ContainSubstring(`"cn": "netctl"`))
	})
}
