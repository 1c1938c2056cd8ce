package rest

import (
	"net/http"
	"net/netip"
)

// HandlerProvider builds a handler; it receives the server's shared
// Formatter. It is called once, when the handler is registered.
type HandlerProvider func(f *Formatter) http.HandlerFunc

// HTTPHandlers is what other plugins use to serve HTTP on the agent's REST
// server.
type HTTPHandlers interface {
	// RegisterHTTPHandler serves path for the given methods (GET when none
	// is given). path is a net/http.ServeMux path and may hold {name}
	// segments, read with r.PathValue("name"). It may be called from Init
	// or AfterInit, before or after the server starts. A path that
	// conflicts with one already registered is refused: the error is logged
	// and, before the server starts, makes AfterInit fail.
	RegisterHTTPHandler(path string, provider HandlerProvider, methods ...string)
	// GetPort returns the port the server listens on (the configured port
	// before AfterInit, 0 when the server is disabled).
	GetPort() int
}

// DescribedHandlers is implemented by HTTPHandlers that show a description
// of each endpoint in the index at GET /. Use RegisterDescribed rather than
// asserting it yourself.
type DescribedHandlers interface {
	RegisterDescribedHandler(path, description string, provider HandlerProvider, methods ...string)
}

// RegisterDescribed registers a handler with a description for the index
// when h supports descriptions, and without one otherwise.
func RegisterDescribed(h HTTPHandlers, path, description string, provider HandlerProvider, methods ...string) {
	if d, ok := h.(DescribedHandlers); ok {
		d.RegisterDescribedHandler(path, description, provider, methods...)
		return
	}
	h.RegisterHTTPHandler(path, provider, methods...)
}

// Endpoint is one registered (method, path) pair as listed by the index.
type Endpoint struct {
	Method      string `json:"method"`
	Path        string `json:"path"`
	Description string `json:"description,omitempty"`
}

// Advertiser gives the base URL at which other machines reach the REST
// server (the agent publishes it in its status record).
type Advertiser interface {
	// AdvertiseURL returns http.conf's advertise-url when it is set (its
	// trailing "/" removed). Otherwise, once the server listens, it is
	// scheme://host:port: https with server-cert-file and server-key-file,
	// else http; the listening address, or nodeIP with the listening port
	// when the endpoint's host is empty or unspecified (0.0.0.0, ::). It
	// is "" when the server is disabled or not listening, and when nodeIP
	// is needed but invalid.
	AdvertiseURL(nodeIP netip.Addr) string
}
