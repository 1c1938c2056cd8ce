package rest_test

import (
	"net/http"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/rest"
)

func TestIndexListsEndpoints(t *testing.T) {
	g := NewWithT(t)
	p := started(t, loopback())
	p.RegisterHTTPHandler("/log/list", hello)
	rest.RegisterDescribed(p, "/log/{logger}/{level}", "set a logger's level", hello, http.MethodPut)
	url := "http://" + p.Addr() + "/"

	status, body, hdr := get(t, client(), url, nil)
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(hdr.Get("Content-Type")).To(HavePrefix("application/json"))
	g.Expect(body).To(MatchJSON(`{"endpoints": [
		{"method": "GET", "path": "/", "description": "this list of endpoints"},
		{"method": "GET", "path": "/log/list"},
		{"method": "PUT", "path": "/log/{logger}/{level}", "description": "set a logger's level"}
	]}`))
	g.Expect(p.Endpoints()).To(HaveLen(3))

	status, body, hdr = get(t, client(), url, http.Header{"Accept": {"text/html"}})
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(hdr.Get("Content-Type")).To(HavePrefix("text/html"))
	g.Expect(body).To(ContainSubstring(`<a href="/log/list"><code>/log/list</code></a>`))
	g.Expect(body).To(ContainSubstring(`<code>/log/{logger}/{level}</code>`), "no link for a path with variables")
	g.Expect(body).NotTo(ContainSubstring(`href="/log/{logger}`))
	g.Expect(body).To(ContainSubstring("set a logger&#39;s level"), "descriptions are HTML-escaped")

	status, _, _ = get(t, client(), "http://"+p.Addr()+"/not-the-index", nil)
	g.Expect(status).To(Equal(http.StatusNotFound), "the index answers / only")
}

func TestIndexContentNegotiation(t *testing.T) {
	p := started(t, loopback())
	url := "http://" + p.Addr() + "/"
	cases := []struct {
		name, accept string
		html         bool
	}{
		{name: "no Accept header", accept: "", html: false},
		{name: "anything", accept: "*/*", html: false},
		{name: "JSON", accept: "application/json", html: false},
		{name: "HTML", accept: "text/html", html: true},
		{name: "browser", accept: "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", html: true},
		{name: "JSON preferred by q", accept: "text/html;q=0.5, application/json", html: false},
		{name: "HTML preferred by q", accept: "application/json;q=0.4, text/html;q=0.9", html: true},
		{name: "text wildcard", accept: "text/*", html: true},
		{name: "specific beats wildcard", accept: "text/*;q=1, text/html;q=0.1, */*;q=0.5", html: false},
		{name: "case and spaces", accept: " Text/HTML ; Q=1 ", html: true},
		{name: "malformed q counts as 1", accept: "text/html;q=abc, application/json;q=0.9", html: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			h := http.Header{}
			if tc.accept != "" {
				h.Set("Accept", tc.accept)
			}
			status, body, hdr := get(t, client(), url, h)
			g.Expect(status).To(Equal(http.StatusOK))
			isHTML := strings.HasPrefix(hdr.Get("Content-Type"), "text/html")
			g.Expect(isHTML).To(Equal(tc.html), body)
		})
	}
}

func TestIndexPageHook(t *testing.T) {
	g := NewWithT(t)
	p := started(t, loopback())
	p.RegisterHTTPHandler("/log/list", hello)
	url := "http://" + p.Addr() + "/"
	_, before, _ := get(t, client(), url, nil)

	seen := make(chan []rest.Endpoint, 1)
	g.Expect(rest.SetIndexPage(p, func(w http.ResponseWriter, r *http.Request, eps []rest.Endpoint) {
		seen <- eps
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte("<p>status of " + r.URL.Path + "</p>"))
	})).To(BeTrue())
	// Registered after the page: the page still sees it.
	p.RegisterHTTPHandler("/later", hello)

	status, body, hdr := get(t, client(), url, http.Header{"Accept": {"text/html"}})
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(hdr.Get("Content-Type")).To(HavePrefix("text/html"))
	g.Expect(body).To(Equal("<p>status of /</p>"))
	got := <-seen
	g.Expect(got).To(Equal(p.Endpoints()), "the page gets the index's endpoints")
	g.Expect(got).To(ContainElement(rest.Endpoint{Method: http.MethodGet, Path: "/later"}))

	for _, h := range []http.Header{nil, {"Accept": {"application/json"}}, {"Accept": {"*/*"}}} {
		status, body, hdr = get(t, client(), url, h)
		g.Expect(status).To(Equal(http.StatusOK))
		g.Expect(hdr.Get("Content-Type")).To(HavePrefix("application/json"), "Accept %v", h)
		g.Expect(body).To(MatchJSON(`{"endpoints": [
			{"method": "GET", "path": "/", "description": "this list of endpoints"},
			{"method": "GET", "path": "/later"},
			{"method": "GET", "path": "/log/list"}
		]}`), "the JSON index is unchanged under Accept %v", h)
	}
	_, again, _ := get(t, client(), url, nil)
	g.Expect(again).NotTo(Equal(before), "the JSON lists /later now")

	p.SetIndexPage(nil)
	_, body, _ = get(t, client(), url, http.Header{"Accept": {"text/html"}})
	g.Expect(body).To(ContainSubstring(`<a href="/later"><code>/later</code></a>`), "nil restores the endpoint table")
}

func TestSetIndexPageOnHandlersWithoutHook(t *testing.T) {
	g := NewWithT(t)
	g.Expect(rest.SetIndexPage(silentHandlers{}, func(http.ResponseWriter, *http.Request, []rest.Endpoint) {})).To(BeFalse())
}

func TestEndpointLinkable(t *testing.T) {
	g := NewWithT(t)
	g.Expect(rest.Endpoint{Method: http.MethodGet, Path: "/contiv/v1/ipam"}.Linkable()).To(BeTrue())
	g.Expect(rest.Endpoint{Method: http.MethodGet, Path: "/log/{logger}"}.Linkable()).To(BeFalse())
	g.Expect(rest.Endpoint{Method: http.MethodPost, Path: "/resync"}.Linkable()).To(BeFalse())
}
