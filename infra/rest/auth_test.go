package rest_test

import (
	"net/http"
	"testing"

	. "github.com/onsi/gomega"
)

func TestBasicAuth(t *testing.T) {
	c := loopback()
	c.ClientBasicAuth = []string{"admin:s3cret", "viewer:pa:ss"}
	p := started(t, c)
	p.RegisterHTTPHandler("/private", hello)
	url := "http://" + p.Addr() + "/private"

	cases := []struct {
		name       string
		user, pass string
		noAuth     bool
		status     int
	}{
		{name: "no credentials", noAuth: true, status: http.StatusUnauthorized},
		{name: "wrong password", user: "admin", pass: "guess", status: http.StatusUnauthorized},
		{name: "unknown user", user: "root", pass: "s3cret", status: http.StatusUnauthorized},
		{name: "password of another user", user: "viewer", pass: "s3cret", status: http.StatusUnauthorized},
		{name: "password prefix", user: "admin", pass: "s3cre", status: http.StatusUnauthorized},
		{name: "right credentials", user: "admin", pass: "s3cret", status: http.StatusOK},
		{name: "password containing a colon", user: "viewer", pass: "pa:ss", status: http.StatusOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
			g.Expect(err).NotTo(HaveOccurred())
			if !tc.noAuth {
				req.SetBasicAuth(tc.user, tc.pass)
			}
			resp, err := client().Do(req)
			g.Expect(err).NotTo(HaveOccurred())
			defer func() { _ = resp.Body.Close() }()
			g.Expect(resp.StatusCode).To(Equal(tc.status))
			if tc.status == http.StatusUnauthorized {
				g.Expect(resp.Header.Get("WWW-Authenticate")).To(HavePrefix(`Basic realm="contiv-agent"`))
				g.Expect(resp.Header.Get("Content-Type")).To(HavePrefix("application/json"))
			}
		})
	}
}

func TestBasicAuthCoversIndex(t *testing.T) {
	g := NewWithT(t)
	c := loopback()
	c.ClientBasicAuth = []string{"admin:s3cret"}
	p := started(t, c)
	status, body, _ := get(t, client(), "http://"+p.Addr()+"/", nil)
	g.Expect(status).To(Equal(http.StatusUnauthorized))
	g.Expect(body).To(MatchJSON(`{"error": "authentication required"}`))
}
