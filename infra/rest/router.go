package rest

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
)

// router is the plugin's ServeMux plus the record of what was registered on
// it. ServeMux accepts new patterns while serving; the mutex guards only the
// record. It is safe for concurrent use.
type router struct {
	mux *http.ServeMux
	log *slog.Logger

	mu        sync.Mutex
	endpoints []Endpoint
	failures  []error
}

func newRouter(log *slog.Logger) *router {
	return &router{mux: http.NewServeMux(), log: log}
}

// handle registers h for each method on path. A refused registration is
// logged and remembered (see failed).
func (r *router) handle(path, description string, h http.Handler, methods []string) {
	if len(methods) == 0 {
		methods = []string{http.MethodGet}
	}
	for _, m := range methods {
		m = strings.ToUpper(strings.TrimSpace(m))
		r.add(Endpoint{Method: m, Path: path, Description: description}, path, h)
	}
}

// handleIndex serves h at exactly "/" and lists it as GET /.
func (r *router) handleIndex(h http.Handler) {
	r.add(Endpoint{Method: http.MethodGet, Path: "/", Description: "this list of endpoints"}, indexPath, h)
}

// add registers h for ep.Method on pattern path and records ep.
func (r *router) add(ep Endpoint, path string, h http.Handler) {
	err := r.handleOne(ep.Method, path, h)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.log.Error("HTTP handler refused", "method", ep.Method, "path", path, "error", err)
		r.failures = append(r.failures, err)
		return
	}
	r.log.Debug("HTTP handler registered", "method", ep.Method, "path", path)
	r.endpoints = append(r.endpoints, ep)
}

// handleOne registers one pattern, turning ServeMux's panic on a malformed
// or conflicting pattern into an error.
func (r *router) handleOne(method, path string, h http.Handler) (err error) {
	pattern := method + " " + path
	switch {
	case method == "" || strings.ContainsAny(method, " /{}"):
		return fmt.Errorf("HTTP handler %q: invalid method %q", path, method)
	case !strings.HasPrefix(path, "/"):
		return fmt.Errorf("HTTP handler %q: path must start with '/'", path)
	case h == nil:
		return fmt.Errorf("HTTP handler %q: provider returned a nil handler", pattern)
	}
	defer func() {
		if rec := recover(); rec != nil {
			err = fmt.Errorf("HTTP handler %q: %v", pattern, rec)
		}
	}()
	r.mux.Handle(pattern, h)
	return nil
}

// list returns every registered endpoint sorted by path, then method.
func (r *router) list() []Endpoint {
	r.mu.Lock()
	out := slices.Clone(r.endpoints)
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b Endpoint) int {
		if c := strings.Compare(a.Path, b.Path); c != 0 {
			return c
		}
		return strings.Compare(a.Method, b.Method)
	})
	return out
}

// failed joins the errors of every refused registration so far.
func (r *router) failed() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return errors.Join(r.failures...)
}
