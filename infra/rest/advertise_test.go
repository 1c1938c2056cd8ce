package rest_test

import (
	"io"
	"net/netip"
	"strconv"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/rest"
	"github.com/contiv-ipam/agent/infra/rest/resttest"
)

func TestAdvertiseURLValidate(t *testing.T) {
	cases := []struct{ name, url, wantErr string }{
		{name: "unset", url: ""},
		{name: "http", url: "http://10.0.0.2:9999"},
		{name: "https with path", url: "https://node1.example.com/contiv/"},
		{name: "IPv6", url: "http://[fd00::2]:9999"},
		{name: "no scheme", url: "10.0.0.2:9999", wantErr: `advertise-url "10.0.0.2:9999": not a URL`},
		{name: "host without scheme", url: "node1/x", wantErr: `advertise-url "node1/x": want an http:// or https:// URL`},
		{name: "other scheme", url: "ftp://h", wantErr: `advertise-url "ftp://h": want an http:// or https:// URL`},
		{name: "no host", url: "http:///x", wantErr: `advertise-url "http:///x": no host`},
		{name: "port only", url: "http://:9999", wantErr: `advertise-url "http://:9999": no host`},
		{name: "bad port", url: "http://h:99999", wantErr: `advertise-url "http://h:99999": invalid port "99999"`},
		{name: "user info", url: "http://u:p@h:1", wantErr: `must not hold user info`},
		{name: "query", url: "http://h:1/?a=b", wantErr: `must not hold a query or a fragment`},
		{name: "fragment", url: "http://h:1/#top", wantErr: `must not hold a query or a fragment`},
		{name: "not a URL", url: "http://h:1/%zz", wantErr: `advertise-url "http://h:1/%zz": not a URL`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			c := rest.DefaultConfig()
			c.AdvertiseURL = tc.url
			err := c.Validate()
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}

// The key is read from http.conf, and a bad value names it and the file.
func TestAdvertiseURLFromFile(t *testing.T) {
	g := NewWithT(t)
	p := fromFile(t, "advertise-url: https://node1.example.com:8443/\n")
	g.Expect(p.Init()).To(Succeed())
	g.Expect(p.AdvertiseURL(netip.Addr{})).To(Equal("https://node1.example.com:8443"))
	g.Expect(p.Close()).To(Succeed())

	p = fromFile(t, "advertise-url: node1:8443\n")
	err := p.Init()
	g.Expect(err).To(MatchError(ContainSubstring("http.conf")))
	g.Expect(err).To(MatchError(ContainSubstring(`advertise-url "node1:8443"`)))
}

// A running server advertises where it listens (the port it picked), with
// https under TLS; a disabled one, or one not started, advertises nothing.
func TestAdvertiseURLOfARunningServer(t *testing.T) {
	g := NewWithT(t)
	var adv rest.Advertiser = started(t, loopback())
	p := adv.(*rest.Plugin)
	g.Expect(adv.AdvertiseURL(netip.Addr{})).To(Equal("http://127.0.0.1:" + strconv.Itoa(p.GetPort())))

	pki := resttest.NewPKI(t)
	c := loopback()
	c.ServerCertFile, c.ServerKeyFile = pki.ServerCertFile, pki.ServerKeyFile
	tp := started(t, c)
	g.Expect(tp.AdvertiseURL(netip.Addr{})).To(Equal("https://127.0.0.1:" + strconv.Itoa(tp.GetPort())))

	notStarted := rest.NewPlugin(rest.UseConf(loopback()), logTo(io.Discard, "info"))
	g.Expect(notStarted.Init()).To(Succeed())
	g.Expect(notStarted.AdvertiseURL(netip.MustParseAddr("10.0.0.2"))).To(BeEmpty())

	c = loopback()
	c.Disabled, c.AdvertiseURL = true, "http://h:1"
	off := rest.NewPlugin(rest.UseConf(c), logTo(io.Discard, "info"))
	g.Expect(off.Init()).To(Succeed())
	g.Expect(off.AfterInit()).To(Succeed())
	g.Expect(off.AdvertiseURL(netip.Addr{})).To(BeEmpty())
	g.Expect(off.Close()).To(Succeed())
}
