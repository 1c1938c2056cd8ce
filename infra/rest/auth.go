package rest

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
)

// The probe paths. With client authentication on (client-basic-auth,
// client-cert-files), GET (and so HEAD) of exactly these paths is served
// to every client, with or without credentials: the kubelet's httpGet
// probes send none. Every other request still needs them. The health
// plugin serves its probes here; only probe handlers belong on them.
const (
	LivenessPath  = "/liveness"
	ReadinessPath = "/readiness"
)

// ProbePaths returns LivenessPath and ReadinessPath: the fixed, and only,
// paths served without client authentication.
func ProbePaths() []string { return []string{LivenessPath, ReadinessPath} }

// basicAuthRealm is sent in WWW-Authenticate with every 401.
const basicAuthRealm = "contiv-agent"

// Refusals of authGate.
var (
	errCertRequired = errors.New("a client certificate is required: one signed by a CA of the server's client-cert-files")
	errAuthRequired = errors.New("authentication required")
)

// authGate lets a request reach the handlers only once its client passed
// every configured check, in order: a client certificate the TLS
// handshake verified (client-cert-files; 403 without one), then one of
// the user:password pairs (client-basic-auth; 401 with WWW-Authenticate).
// A probe request (isProbe) that fails them is served anyway, marked
// anonymous (Anonymous).
type authGate struct {
	next http.Handler
	// mux is the router's: isProbe asks it which pattern a request matches.
	mux   *http.ServeMux
	f     *Formatter
	certs bool // client-cert-files: the TLS config verifies the certificates given
	creds []credential
}

// credential holds hashes so that comparisons take the same time whatever
// the lengths involved.
type credential struct {
	user, pass [sha256.Size]byte
}

// newAuthGate wraps next when c asks for client authentication, and
// returns nil otherwise; c was checked by Config.Validate and the TLS
// config built by serverTLS, which verifies the certificates clients give.
func newAuthGate(next http.Handler, mux *http.ServeMux, f *Formatter, c *Config) (*authGate, error) {
	certs := c.TLS() && len(c.ClientCertFiles) > 0
	if !certs && len(c.ClientBasicAuth) == 0 {
		return nil, nil
	}
	a := &authGate{next: next, mux: mux, f: f, certs: certs}
	for _, e := range c.ClientBasicAuth {
		user, pass, err := splitCredentials(e)
		if err != nil {
			return nil, err
		}
		a.creds = append(a.creds, credential{user: sha256.Sum256([]byte(user)), pass: sha256.Sum256([]byte(pass))})
	}
	return a, nil
}

func (a *authGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	authed, status, err := a.authenticate(r)
	switch {
	case err == nil:
		a.next.ServeHTTP(w, authed)
	case a.isProbe(r):
		a.next.ServeHTTP(w, withAnonymous(r))
	default:
		if status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Basic realm="`+basicAuthRealm+`", charset="UTF-8"`)
		}
		a.f.Error(w, status, err)
	}
}

// authenticate runs the checks; it returns r with the checked basic-auth
// user, or the status and error of the first refusal.
func (a *authGate) authenticate(r *http.Request) (*http.Request, int, error) {
	if a.certs && !verifiedCert(r) {
		// 403, not 401: there is no HTTP challenge for a certificate, and
		// a password cannot replace it.
		return nil, http.StatusForbidden, errCertRequired
	}
	if len(a.creds) == 0 {
		return r, 0, nil
	}
	user, pass, ok := r.BasicAuth()
	if !ok || !a.allowed(user, pass) {
		return nil, http.StatusUnauthorized, errAuthRequired
	}
	return withUser(r, user), 0, nil
}

// verifiedCert reports whether the TLS handshake verified a client
// certificate against client-cert-files. With tls.VerifyClientCertIfGiven
// a certificate that fails verification fails the handshake, so a request
// carries either a verified chain or no certificate at all.
func verifiedCert(r *http.Request) bool {
	return r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0
}

// isProbe reports whether r is a GET or HEAD of exactly a probe path that
// the router serves with the GET handler registered there. Asking the mux
// (rather than comparing the path alone) keeps the exemption from
// reaching any other handler: a wildcard pattern that would answer
// /liveness while nothing is registered there, a redirect to a cleaned
// path, another method.
func (a *authGate) isProbe(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	for _, path := range ProbePaths() {
		if r.URL.Path == path {
			_, pattern := a.mux.Handler(r)
			return pattern == http.MethodGet+" "+path
		}
	}
	return false
}

// allowed compares against every pair without stopping early.
func (a *authGate) allowed(user, pass string) bool {
	u, p := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(pass))
	match := 0
	for i := range a.creds {
		match |= subtle.ConstantTimeCompare(u[:], a.creds[i].user[:]) &
			subtle.ConstantTimeCompare(p[:], a.creds[i].pass[:])
	}
	return match == 1
}
