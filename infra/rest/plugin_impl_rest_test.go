package rest_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/rest"
	"github.com/contiv-ipam/agent/infra/rest/resttest"
)

func TestPortZeroAndAddr(t *testing.T) {
	g := NewWithT(t)
	p := started(t, loopback())
	g.Expect(p.GetPort()).To(BeNumerically(">", 0))
	g.Expect(p.Addr()).To(Equal(fmt.Sprintf("127.0.0.1:%d", p.GetPort())))
}

func TestTakenPortFailsAfterInit(t *testing.T) {
	g := NewWithT(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = ln.Close() }()
	c := loopback()
	c.Endpoint = ln.Addr().String()
	p := rest.NewPlugin(rest.UseConf(c), logTo(io.Discard, "info"))
	g.Expect(p.Init()).To(Succeed())
	err = p.AfterInit()
	g.Expect(err).To(MatchError(ContainSubstring(fmt.Sprintf("listen on endpoint %q", c.Endpoint))))
	g.Expect(p.Addr()).To(BeEmpty())
	g.Expect(p.Close()).To(Succeed())
}

func TestRegisterBeforeAndAfterStart(t *testing.T) {
	g := NewWithT(t)
	p := rest.NewPlugin(rest.UseConf(loopback()), logTo(io.Discard, "info"))
	p.RegisterHTTPHandler("/before", hello) // before Init
	g.Expect(p.Init()).To(Succeed())
	p.RegisterHTTPHandler("/in-init", hello, http.MethodGet, http.MethodPost)
	g.Expect(p.AfterInit()).To(Succeed())
	defer func() { g.Expect(p.Close()).To(Succeed()) }()
	p.RegisterHTTPHandler("/items/{id}", func(f *rest.Formatter) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			f.JSON(w, http.StatusOK, map[string]string{"id": r.PathValue("id")})
		}
	}, "put")

	base := "http://" + p.Addr()
	cases := []struct {
		name, method, path string
		status             int
		body               string
	}{
		{"registered before Init", http.MethodGet, "/before", 200, "hello"},
		{"registered in Init, GET", http.MethodGet, "/in-init", 200, "hello"},
		{"registered in Init, POST", http.MethodPost, "/in-init", 200, "hello"},
		{"registered while serving, path variable", http.MethodPut, "/items/42", 200, `"id": "42"`},
		{"wrong method", http.MethodDelete, "/items/42", 405, `"error": "method DELETE not allowed on /items/42 (allowed: PUT)"`},
		{"unknown path", http.MethodGet, "/nothing", 404, `"error": "no endpoint at /nothing (GET / lists them)"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			req, err := http.NewRequestWithContext(t.Context(), tc.method, base+tc.path, nil)
			g.Expect(err).NotTo(HaveOccurred())
			resp, err := client().Do(req)
			g.Expect(err).NotTo(HaveOccurred())
			defer func() { _ = resp.Body.Close() }()
			body, _ := io.ReadAll(resp.Body)
			g.Expect(resp.StatusCode).To(Equal(tc.status))
			g.Expect(string(body)).To(ContainSubstring(tc.body))
		})
	}
}

func TestConcurrentRegistrationWhileServing(t *testing.T) {
	g := NewWithT(t)
	srv := resttest.New(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 50 {
			srv.Plugin.RegisterHTTPHandler(fmt.Sprintf("/r/%d", i), hello)
		}
	}()
	for range 20 {
		status, _ := srv.Get("/")
		g.Expect(status).To(Equal(http.StatusOK))
	}
	<-done
	status, body := srv.Get("/r/49")
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(body).To(Equal("hello"))
}

func TestRefusedHandlers(t *testing.T) {
	cases := []struct {
		name     string
		register func(p *rest.Plugin)
		wantErr  string
	}{
		{"same path twice", func(p *rest.Plugin) {
			p.RegisterHTTPHandler("/x", hello)
			p.RegisterHTTPHandler("/x", hello)
		}, `"GET /x"`},
		{"conflicting variables", func(p *rest.Plugin) {
			p.RegisterHTTPHandler("/a/{x}", hello)
			p.RegisterHTTPHandler("/a/{y}", hello)
		}, `"GET /a/{y}"`},
		{"relative path", func(p *rest.Plugin) { p.RegisterHTTPHandler("x", hello) }, "must start with '/'"},
		{"nil provider", func(p *rest.Plugin) { p.RegisterHTTPHandler("/nil", nil) }, "nil handler"},
		{"method with a space", func(p *rest.Plugin) { p.RegisterHTTPHandler("/m", hello, "GET /x") }, "invalid method"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			p := rest.NewPlugin(rest.UseConf(loopback()), logTo(io.Discard, "info"))
			g.Expect(p.Init()).To(Succeed())
			tc.register(p)
			g.Expect(p.AfterInit()).To(MatchError(ContainSubstring(tc.wantErr)))
			g.Expect(p.Close()).To(Succeed())
		})
	}
}

func TestRequestsLoggedAtDebug(t *testing.T) {
	g := NewWithT(t)
	out := &syncBuffer{}
	p := started(t, loopback(), logTo(out, "debug"))
	p.RegisterHTTPHandler("/logged", hello)
	status, _, _ := get(t, client(), "http://"+p.Addr()+"/logged", nil)
	g.Expect(status).To(Equal(http.StatusOK))
	g.Eventually(out.String).Should(And(
		ContainSubstring(`msg="HTTP request"`), ContainSubstring("path=/logged"),
		ContainSubstring("status=200"), ContainSubstring("logger=http")))
}

func TestCloseIsGracefulAndIdempotent(t *testing.T) {
	g := NewWithT(t)
	p := rest.NewPlugin(rest.UseConf(loopback()), logTo(io.Discard, "info"))
	entered, release := make(chan struct{}), make(chan struct{})
	p.RegisterHTTPHandler("/slow", func(f *rest.Formatter) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			close(entered)
			<-release
			f.Text(w, http.StatusOK, "finished")
		}
	})
	g.Expect(p.Init()).To(Succeed())
	g.Expect(p.AfterInit()).To(Succeed())
	url := "http://" + p.Addr() + "/slow"

	type result struct {
		status int
		body   string
		err    error
	}
	got := make(chan result, 1)
	go func() {
		resp, err := client().Get(url)
		if err != nil {
			got <- result{err: err}
			return
		}
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		got <- result{status: resp.StatusCode, body: string(b), err: err}
	}()
	<-entered
	closed := make(chan error, 1)
	go func() { closed <- p.Close() }()
	g.Consistently(closed).ShouldNot(Receive(), "Close waits for the request in flight")
	close(release)
	g.Eventually(closed).Should(Receive(BeNil()))
	r := <-got
	g.Expect(r.err).NotTo(HaveOccurred())
	g.Expect(r.status).To(Equal(http.StatusOK))
	g.Expect(r.body).To(Equal("finished"))
	g.Expect(p.Close()).To(Succeed(), "second Close")
	_, err := client().Get(url)
	g.Expect(err).To(HaveOccurred(), "nothing listens any more")
}

func TestShutdownTimeoutIsAnError(t *testing.T) {
	g := NewWithT(t)
	c := loopback()
	c.ShutdownTimeout = 50 * time.Millisecond
	p := rest.NewPlugin(rest.UseConf(c), logTo(io.Discard, "info"))
	entered, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	p.RegisterHTTPHandler("/stuck", func(*rest.Formatter) http.HandlerFunc {
		return func(http.ResponseWriter, *http.Request) {
			close(entered)
			<-release
		}
	})
	g.Expect(p.Init()).To(Succeed())
	g.Expect(p.AfterInit()).To(Succeed())
	go func() {
		if resp, err := client().Get("http://" + p.Addr() + "/stuck"); err == nil {
			_ = resp.Body.Close()
		}
	}()
	<-entered
	g.Expect(p.Close()).To(MatchError(ContainSubstring("shutdown-timeout 50ms")))
}

func TestResttestHelpers(t *testing.T) {
	g := NewWithT(t)
	srv := resttest.New(t)
	srv.Plugin.RegisterHTTPHandler("/echo", func(f *rest.Formatter) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			f.JSON(w, http.StatusCreated, map[string]string{"method": r.Method, "body": string(b)})
		}
	}, http.MethodPut, http.MethodPost)
	g.Expect(srv.URL()).To(HavePrefix("http://127.0.0.1:"))
	for _, m := range []string{http.MethodPut, http.MethodPost} {
		var status int
		var body string
		if m == http.MethodPut {
			status, body = srv.Put("/echo", "payload")
		} else {
			status, body = srv.Post("/echo", "payload")
		}
		g.Expect(status).To(Equal(http.StatusCreated))
		var got map[string]string
		g.Expect(json.Unmarshal([]byte(body), &got)).To(Succeed())
		g.Expect(got).To(Equal(map[string]string{"method": m, "body": "payload"}))
	}
	status, body := srv.Do(http.MethodGet, "/", "", http.Header{"Accept": {"text/html"}})
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(strings.ToLower(body)).To(ContainSubstring("<!doctype html>"))
}

// Unknown paths and wrong methods answer the JSON error shape of every
// endpoint (with Allow on 405); redirects of ServeMux pass unchanged.
func TestNotFoundAndMethodNotAllowedAreJSON(t *testing.T) {
	p := rest.NewPlugin(rest.UseConf(loopback()), logTo(io.Discard, "info"))
	p.RegisterHTTPHandler("/only-post", hello, http.MethodPost)
	p.RegisterHTTPHandler("/tree/", hello)
	g := NewWithT(t)
	g.Expect(p.Init()).To(Succeed())
	g.Expect(p.AfterInit()).To(Succeed())
	defer func() { g.Expect(p.Close()).To(Succeed()) }()
	noRedirect := &http.Client{Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	cases := []struct {
		name, method, path string
		status             int
		body, allow        string
	}{
		{"unknown path", http.MethodGet, "/no/such/thing", 404, `{"error": "no endpoint at /no/such/thing (GET / lists them)"}`, ""},
		{"wrong method", http.MethodGet, "/only-post", 405, `{"error": "method GET not allowed on /only-post (allowed: POST)"}`, "POST"},
		{"wrong method on the index", http.MethodDelete, "/", 405, `{"error": "method DELETE not allowed on / (allowed: GET, HEAD)"}`, "GET, HEAD"},
		{"redirect to the trailing slash (3xx)", http.MethodGet, "/tree", 0, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			req, err := http.NewRequestWithContext(t.Context(), tc.method, "http://"+p.Addr()+tc.path, nil)
			g.Expect(err).NotTo(HaveOccurred())
			resp, err := noRedirect.Do(req)
			g.Expect(err).NotTo(HaveOccurred())
			defer func() { _ = resp.Body.Close() }()
			body, _ := io.ReadAll(resp.Body)
			g.Expect(resp.Header.Get("Allow")).To(Equal(tc.allow))
			if tc.status == 0 {
				g.Expect(resp.StatusCode).To(BeNumerically(">=", 300))
				g.Expect(resp.StatusCode).To(BeNumerically("<", 400))
				g.Expect(resp.Header.Get("Location")).To(Equal("/tree/"))
				return
			}
			g.Expect(resp.StatusCode).To(Equal(tc.status))
			g.Expect(resp.Header.Get("Content-Type")).To(HavePrefix("application/json"))
			g.Expect(string(body)).To(MatchJSON(tc.body))
		})
	}
}
