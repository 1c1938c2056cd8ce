package rest_test

import (
	"net/http"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/rest"
	"github.com/contiv-ipam/agent/infra/rest/resttest"
)

func TestClientAuthenticated(t *testing.T) {
	pki := resttest.NewPKI(t)
	serverOnly := loopback()
	serverOnly.ServerCertFile, serverOnly.ServerKeyFile = pki.ServerCertFile, pki.ServerKeyFile
	basic := loopback()
	basic.ClientBasicAuth = []string{"admin:s3cret"}
	disabled := basic
	disabled.Disabled = true
	cases := []struct {
		name string
		conf rest.Config
		want bool
	}{
		{name: "no authentication", conf: loopback()},
		{name: "HTTPS without client certificates", conf: serverOnly},
		{name: "client-basic-auth", conf: basic, want: true},
		{name: "client-cert-files", conf: pki.MutualTLS(loopback()), want: true},
		{name: "disabled server", conf: disabled},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			p := newPlugin(tc.conf)
			g.Expect(p.ClientAuthenticated()).To(BeFalse(), "unknown before Init")
			g.Expect(p.Init()).To(Succeed())
			t.Cleanup(func() { _ = p.Close() })
			g.Expect(p.ClientAuthenticated()).To(Equal(tc.want))
			g.Expect(rest.Authenticates(p)).To(Equal(tc.want))
		})
	}
	t.Run("a handler set that does not say", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(rest.Authenticates(nil)).To(BeFalse())
		g.Expect(rest.Authenticates(silentHandlers{})).To(BeFalse())
	})
}

// silentHandlers is an HTTPHandlers that does not implement
// ClientAuthenticator.
type silentHandlers struct{}

func (silentHandlers) RegisterHTTPHandler(string, rest.HandlerProvider, ...string) {}
func (silentHandlers) GetPort() int                                                { return 0 }

// whoAmI answers the ClientOf of each request as JSON.
func whoAmI(f *rest.Formatter) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c := rest.ClientOf(r)
		f.JSON(w, http.StatusOK, map[string]string{"user": c.User, "cn": c.CertCN, "remote": c.Remote})
	}
}

func TestClientOfNamesTheBasicAuthUser(t *testing.T) {
	g := NewWithT(t)
	c := loopback()
	c.ClientBasicAuth = []string{"admin:s3cret"}
	p := started(t, c)
	p.RegisterHTTPHandler("/who", whoAmI)
	status, body, _ := get(t, client(), "http://"+p.Addr()+"/who", resttest.BasicAuth("admin", "s3cret"))
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(body).To(MatchRegexp(`"user": "admin"`))
	g.Expect(body).To(MatchRegexp(`"remote": "127\.0\.0\.1:\d+"`))
	g.Expect(body).To(ContainSubstring(`"cn": ""`))
}

func TestClientOfIgnoresAnUncheckedBasicAuthHeader(t *testing.T) {
	g := NewWithT(t)
	p := started(t, loopback())
	p.RegisterHTTPHandler("/who", whoAmI)
	status, body, _ := get(t, client(), "http://"+p.Addr()+"/who", resttest.BasicAuth("admin", "anything"))
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(body).To(ContainSubstring(`"user": ""`), "no client-basic-auth: the header names nobody")
}

func TestClientOfNamesTheCertificateSubject(t *testing.T) {
	g := NewWithT(t)
	pki := resttest.NewPKI(t)
	srv := resttest.New(t, rest.UseConf(pki.MutualTLS(resttest.Config())))
	srv.Plugin.RegisterHTTPHandler("/who", whoAmI)
	g.Expect(srv.Plugin.ClientAuthenticated()).To(BeTrue())
	status, body := srv.WithClient(pki.Client("netctl")).Get("/who")
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(body).To(ContainSubstring(`"cn": "netctl"`))
	g.Expect(body).To(ContainSubstring(`"user": ""`))
}

// resttest's PKI gives a client without a certificate: the server refuses
// its requests with 403, the probes aside.
func TestPKIClientWithoutCertificateIsRefused(t *testing.T) {
	g := NewWithT(t)
	pki := resttest.NewPKI(t)
	srv := resttest.New(t, rest.UseConf(pki.MutualTLS(resttest.Config())))
	registerProbes(srv.Plugin)
	anonymous := srv.WithClient(pki.Client(""))
	status, body := anonymous.Get("/")
	g.Expect(status).To(Equal(http.StatusForbidden))
	g.Expect(body).To(MatchJSON(`{"error": "a client certificate is required: one signed by a CA of the server's client-cert-files"}`))
	status, body = anonymous.Get("/liveness")
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(body).To(MatchJSON(`{"anonymous": true, "user": "", "cn": ""}`))
}
