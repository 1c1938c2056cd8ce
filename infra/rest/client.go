package rest

import (
	"context"
	"net/http"
)

// ClientAuthKeys names the http.conf keys that make the server
// authenticate every client, for the messages of handlers that refuse to
// serve without it.
const ClientAuthKeys = "client-basic-auth, or client-cert-files with server-cert-file and server-key-file"

// ClientAuthenticator is implemented by HTTPHandlers that can tell whether
// every request they pass to a handler comes from an authenticated client.
// Use Authenticates rather than asserting it yourself.
type ClientAuthenticator interface {
	// ClientAuthenticated reports whether the server lets a request
	// reach a handler only once the client is authenticated: by
	// client-basic-auth, or by a certificate signed by one of the CAs of
	// client-cert-files. The one exception is the probes (GET of
	// ProbePaths), served to every client; a handler that asks is never
	// registered there. It is known after Init and never changes.
	ClientAuthenticated() bool
}

var _ ClientAuthenticator = (*Plugin)(nil)

// Authenticates reports whether h authenticates every client; false when
// h is nil or does not say (a test fake).
func Authenticates(h HTTPHandlers) bool {
	a, ok := h.(ClientAuthenticator)
	return ok && a.ClientAuthenticated()
}

// ClientAuthenticated implements ClientAuthenticator.
func (p *Plugin) ClientAuthenticated() bool {
	return !p.conf.Disabled && p.handler != nil && p.auth != nil
}

// Client is who sent a request, as far as the server knows it.
type Client struct {
	// User is the basic-auth user name, set only when the server checked
	// the password (client-basic-auth).
	User string
	// CertCN is the subject common name of the client certificate, set
	// only when the server verified the certificate (client-cert-files).
	CertCN string
	// Remote is the client's address (host:port).
	Remote string
}

// ClientOf tells who sent r. A user name or certificate the server did not
// verify is never reported: a basic-auth header on a server without
// client-basic-auth is ignored.
func ClientOf(r *http.Request) Client {
	c := Client{Remote: r.RemoteAddr}
	if u, ok := r.Context().Value(basicAuthUserKey{}).(string); ok {
		c.User = u
	}
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		c.CertCN = r.TLS.VerifiedChains[0][0].Subject.CommonName
	}
	return c
}

// Anonymous reports whether r reached its handler without the client
// authentication the server requires: a probe (GET of ProbePaths) from a
// client without valid credentials. A probe handler answers such a client
// no more than the probe needs. It is false on a server that
// authenticates nobody, where every endpoint is equally open.
func Anonymous(r *http.Request) bool {
	v, _ := r.Context().Value(anonymousKey{}).(bool)
	return v
}

// basicAuthUserKey is the context key of the user name authGate checked.
type basicAuthUserKey struct{}

// withUser records the user authGate let through.
func withUser(r *http.Request, user string) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), basicAuthUserKey{}, user))
}

// anonymousKey is the context key of Anonymous.
type anonymousKey struct{}

// withAnonymous marks a probe authGate let through without credentials.
func withAnonymous(r *http.Request) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), anonymousKey{}, true))
}
