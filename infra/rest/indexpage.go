package rest

import (
	"net/http"
	"strings"
	"sync/atomic"
)

// IndexPageFunc writes the HTML answer of GET / for a client whose Accept
// header prefers text/html. endpoints is the list the JSON index shows
// (every registered endpoint, sorted by path, then method), fresh for
// each request. It runs on the request's goroutine, concurrently with
// other requests: it must be safe for concurrent use.
type IndexPageFunc func(w http.ResponseWriter, r *http.Request, endpoints []Endpoint)

// IndexPageSetter is implemented by HTTPHandlers whose HTML index page a
// plugin may provide. Use SetIndexPage rather than asserting it yourself.
type IndexPageSetter interface {
	// SetIndexPage makes fn answer GET / for clients that prefer HTML;
	// nil restores the built-in endpoint table. A later call replaces an
	// earlier one. It may be called before or after the server starts.
	SetIndexPage(fn IndexPageFunc)
}

// SetIndexPage makes fn the HTML index page of h when h supports it, and
// reports whether it did (a fake HTTPHandlers may not: the page is then
// simply not served).
func SetIndexPage(h HTTPHandlers, fn IndexPageFunc) bool {
	s, ok := h.(IndexPageSetter)
	if ok {
		s.SetIndexPage(fn)
	}
	return ok
}

// Linkable tells whether a browser can follow a link to e: a GET of a
// path without {variables}.
func (e Endpoint) Linkable() bool {
	return e.Method == http.MethodGet && !strings.Contains(e.Path, "{")
}

// indexPageHolder holds the provided page; nil means the built-in table.
type indexPageHolder struct {
	fn atomic.Pointer[IndexPageFunc]
}

func (h *indexPageHolder) set(fn IndexPageFunc) {
	if fn == nil {
		h.fn.Store(nil)
		return
	}
	h.fn.Store(&fn)
}

func (h *indexPageHolder) get() IndexPageFunc {
	if p := h.fn.Load(); p != nil {
		return *p
	}
	return nil
}
