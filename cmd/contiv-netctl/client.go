package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// client sends requests to the agent's REST server as the global flags
// say.
type client struct {
	base     *url.URL // scheme and host, and a path prefix if any
	hc       *http.Client
	user     string // basic auth; "" = none
	pass     string
	userFrom string // where user came from, for hints
	timeout  time.Duration
}

// newClient checks the global flags and builds the client. A bad flag
// value or combination is a usageError; a certificate file that cannot be
// read or parsed is an error naming the file.
func newClient(g *globals, usage func(io.Writer)) (*client, error) {
	return newClientAt(g, g.server, g.serverFrom, usage)
}

// newClientAt is newClient for the agent at server (from says where that
// came from: "-server", "the status record of node x", ...). TLS flags
// with an http:// server are a usage error only for -server: an agent's
// status record may name an http server while others are https.
func newClientAt(g *globals, server, from string, usage func(io.Writer)) (*client, error) {
	bad := func(format string, args ...any) error {
		return &usageError{msg: fmt.Sprintf(format, args...), usage: usage}
	}
	u, err := url.Parse(server)
	switch {
	case err != nil:
		return nil, bad("%s %q: not a URL: want http://host:port or https://host:port", from, server)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, bad("%s %q: want http://host:port or https://host:port", from, server)
	case u.Host == "":
		return nil, bad("%s %q: no host: want http://host:port or https://host:port", from, server)
	case u.User != nil:
		return nil, bad("%s %q: credentials in the URL: give them with -user or %s", from, u.Redacted(), envUser)
	case u.RawQuery != "" || u.Fragment != "":
		return nil, bad("%s %q: want no query and no fragment", from, server)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	if g.timeout <= 0 {
		return nil, bad("-timeout %s: want a positive duration such as 30s", g.timeout)
	}
	c := &client{base: u, userFrom: g.userFrom, timeout: g.timeout}
	if g.user != "" {
		user, pass, ok := strings.Cut(g.user, ":")
		if !ok || user == "" {
			return nil, bad("%s: want user:password (the value is not shown)", g.userFrom)
		}
		c.user, c.pass = user, pass
	}
	if (g.cert == "") != (g.key == "") {
		return nil, bad("-cert and -key go together: give both or neither")
	}
	if u.Scheme == "http" && (g.cacert != "" || g.cert != "") && from == g.serverFrom && server == g.server {
		return nil, bad("-cacert, -cert and -key are for an https:// server; %s is %q", from, server)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if u.Scheme == "https" {
		tc, err := tlsConfig(g)
		if err != nil {
			return nil, err
		}
		tr.TLSClientConfig = tc
	}
	c.hc = &http.Client{Timeout: g.timeout, Transport: tr}
	return c, nil
}

// tlsConfig is the TLS configuration of -cacert, -cert and -key.
func tlsConfig(g *globals) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if g.cacert != "" {
		pem, err := os.ReadFile(g.cacert)
		if err != nil {
			return nil, fmt.Errorf("-cacert: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-cacert %s: no PEM certificate in the file", g.cacert)
		}
		tc.RootCAs = pool
	}
	if g.cert != "" {
		cert, err := tls.LoadX509KeyPair(g.cert, g.key)
		if err != nil {
			return nil, fmt.Errorf("-cert %s, -key %s: %w", g.cert, g.key, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// url is the URL of path with query q.
func (c *client) url(path string, q url.Values) string {
	u := *c.base
	u.Path += path
	u.RawQuery = q.Encode()
	return u.String()
}

// serverError is a reply other than 2xx: the status and the server's
// message ({"error", "reason"} of the agent, else the body, cut).
type serverError struct {
	method, url string
	status      int
	msg, reason string
	hint        string
}

func (e *serverError) Error() string {
	s := fmt.Sprintf("%s %s: %d %s", e.method, e.url, e.status, http.StatusText(e.status))
	if e.msg != "" {
		s += ": " + e.msg
	}
	if e.hint != "" {
		s += " (" + e.hint + ")"
	}
	return s
}

// maxReply bounds a reply body the client reads.
const maxReply = maxDocument + 1<<20

// do sends one request; body, if not nil, is sent as JSON. It returns the
// body of a 2xx reply, and a *serverError for any other status.
func (c *client) do(ctx context.Context, method, path string, q url.Values, body []byte) ([]byte, error) {
	target := c.url(path, q)
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, target, err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.user != "" {
		req.SetBasicAuth(c.user, c.pass)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %s", method, target, c.transportError(ctx, err))
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxReply+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: reading the reply: %s", method, target, c.transportError(ctx, err))
	}
	if len(data) > maxReply {
		return nil, fmt.Errorf("%s %s: the reply is longer than %d bytes", method, target, maxReply)
	}
	if resp.StatusCode/100 == 2 {
		return data, nil
	}
	se := &serverError{method: method, url: target, status: resp.StatusCode}
	var eb struct {
		Error  string `json:"error"`
		Reason string `json:"reason"`
	}
	if json.Unmarshal(data, &eb) == nil && eb.Error != "" {
		se.msg, se.reason = eb.Error, eb.Reason
	} else {
		se.msg = cut(strings.TrimSpace(string(data)))
	}
	if resp.StatusCode == http.StatusUnauthorized {
		if c.user == "" {
			se.hint = "the server wants basic authentication: give -user user:password or set " + envUser
		} else {
			se.hint = "the server refused the user and password of " + c.userFrom
		}
	}
	return nil, se
}

// transportError says why a request got no reply, with a hint.
func (c *client) transportError(ctx context.Context, err error) string {
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var opErr *net.OpError
	var certErr *tls.CertificateVerificationError
	switch {
	case ctx.Err() != nil:
		return "interrupted"
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return fmt.Sprintf("no reply within -timeout %s", c.timeout)
	case errors.As(err, &unknownCA):
		return fmt.Sprintf("%v (give the CA that signed the server's certificate with -cacert)", err)
	case errors.As(err, &hostname):
		return fmt.Sprintf("%v (-server must name a host of the certificate)", err)
	case errors.As(err, &certErr):
		return err.Error()
	case strings.Contains(err.Error(), "certificate required") || strings.Contains(err.Error(), "bad certificate"):
		return fmt.Sprintf("%v (the server wants a client certificate: give -cert and -key)", err)
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return fmt.Sprintf("server unreachable: %v", opErr)
	}
	return err.Error()
}

// isTimeout tells whether err is a network timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// maxQuoted bounds a server message quoted in an error, in bytes.
const maxQuoted = 300

// cut cuts s to maxQuoted bytes.
func cut(s string) string {
	if len(s) > maxQuoted {
		return strings.ToValidUTF8(s[:maxQuoted], "") + "..."
	}
	return s
}
