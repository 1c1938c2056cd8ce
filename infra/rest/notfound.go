package rest

import (
	"bytes"
	"fmt"
	"net/http"
)

// jsonMux serves mux, except that the answers ServeMux writes itself when
// no pattern matches (404, and 405 with an Allow header, as plain text)
// become the JSON error shape of every endpoint ({"error": "..."}).
// Redirects (a path to clean, a missing trailing slash) pass unchanged.
type jsonMux struct {
	mux *http.ServeMux
	f   *Formatter
}

func (m *jsonMux) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h, pattern := m.mux.Handler(r)
	if pattern != "" {
		m.mux.ServeHTTP(w, r)
		return
	}
	rec := &muxAnswer{header: http.Header{}}
	h.ServeHTTP(rec, r)
	switch rec.status {
	case http.StatusNotFound:
		m.f.Error(w, http.StatusNotFound, fmt.Errorf("no endpoint at %s (GET / lists them)", r.URL.Path))
	case http.StatusMethodNotAllowed:
		allow := rec.header.Get("Allow")
		w.Header().Set("Allow", allow)
		m.f.Error(w, http.StatusMethodNotAllowed, fmt.Errorf("method %s not allowed on %s (allowed: %s)", r.Method, r.URL.Path, allow))
	default:
		rec.replay(w, m.f)
	}
}

// muxAnswer keeps the small answer ServeMux writes when nothing matches.
type muxAnswer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (a *muxAnswer) Header() http.Header { return a.header }

func (a *muxAnswer) WriteHeader(status int) {
	if a.status == 0 {
		a.status = status
	}
}

func (a *muxAnswer) Write(b []byte) (int, error) {
	a.WriteHeader(http.StatusOK)
	return a.body.Write(b)
}

// replay writes the kept answer to w.
func (a *muxAnswer) replay(w http.ResponseWriter, f *Formatter) {
	for k, v := range a.header {
		w.Header()[k] = v
	}
	if a.status == 0 {
		a.status = http.StatusOK
	}
	w.WriteHeader(a.status)
	f.writeBody(w, a.body.Bytes())
}
