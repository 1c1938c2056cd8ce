package rest

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
)

// basicAuthRealm is sent in WWW-Authenticate with every 401.
const basicAuthRealm = "contiv-agent"

// basicAuth lets a request through only when it carries one of the
// configured user:password pairs.
type basicAuth struct {
	next  http.Handler
	f     *Formatter
	creds []credential
}

// credential holds hashes so that comparisons take the same time whatever
// the lengths involved.
type credential struct {
	user, pass [sha256.Size]byte
}

// newBasicAuth wraps next; entries were checked by Config.Validate.
func newBasicAuth(next http.Handler, f *Formatter, entries []string) (*basicAuth, error) {
	a := &basicAuth{next: next, f: f}
	for _, e := range entries {
		user, pass, err := splitCredentials(e)
		if err != nil {
			return nil, err
		}
		a.creds = append(a.creds, credential{user: sha256.Sum256([]byte(user)), pass: sha256.Sum256([]byte(pass))})
	}
	return a, nil
}

func (a *basicAuth) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if user, pass, ok := r.BasicAuth(); ok && a.allowed(user, pass) {
		a.next.ServeHTTP(w, withUser(r, user))
		return
	}
	w.Header().Set("WWW-Authenticate", `Basic realm="`+basicAuthRealm+`", charset="UTF-8"`)
	a.f.Error(w, http.StatusUnauthorized, errors.New("authentication required"))
}

// allowed compares against every pair without stopping early.
func (a *basicAuth) allowed(user, pass string) bool {
	u, p := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(pass))
	match := 0
	for i := range a.creds {
		match |= subtle.ConstantTimeCompare(u[:], a.creds[i].user[:]) &
			subtle.ConstantTimeCompare(p[:], a.creds[i].pass[:])
	}
	return match == 1
}
