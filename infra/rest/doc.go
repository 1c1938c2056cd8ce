// Package rest is the agent's HTTP server plugin ("http", config http.conf).
// Other plugins serve their REST endpoints on it through HTTPHandlers.
//
// What a plugin that serves endpoints does, in order:
//  1. Declare a dependency field typed HTTPHandlers (nil means "no REST";
//     check for nil before use).
//  2. In Init or AfterInit call RegisterHTTPHandler(path, provider,
//     methods...), or RegisterDescribed to add a description to the index.
//     The provider receives the shared Formatter and returns the handler;
//     paths are net/http.ServeMux paths ("/log/{logger}/{level}", read the
//     segments with r.PathValue). Registering after the server started is
//     allowed. A malformed or conflicting path is refused and logged; when
//     that happens before the server starts, AfterInit fails.
//  3. Answer with Formatter.JSON, JSONList (a long array, encoded item by
//     item), JSONStream (a large value: JSON's bytes, indented while
//     written), Text, HTML or Error ({"error": "..."}). The server answers
//     unknown paths (404) and wrong methods (405, with Allow) in the same
//     JSON error shape.
//
// What the agent (or a test) does, in order:
//  1. NewPlugin(opts...); RegisterFlags(fs) before parsing the command line
//     adds -http-config, -config-dir and -http-port.
//  2. Init: reads http.conf (defaults when there is none), applies
//     -http-port / HTTP_PORT to the endpoint's port, validates, loads the
//     TLS files and adds the index at GET /.
//  3. AfterInit: listens on the endpoint synchronously (a port in use fails
//     start-up with an error naming the endpoint) and serves in a goroutine.
//  4. Close: graceful shutdown within shutdown-timeout, then waits for the
//     serving goroutine.
//
// Security: the default endpoint is 127.0.0.1:9999 (loopback); Init warns
// when the endpoint is on all interfaces (empty host, 0.0.0.0, ::) and when
// basic auth is on without TLS. HTTPS is on when server-cert-file and
// server-key-file are set. With client authentication on, every request
// must pass every configured check, in this order:
//  1. client-cert-files: a client certificate signed by one of those CAs.
//     The handshake accepts a client without a certificate
//     (tls.VerifyClientCertIfGiven) but fails on one that does not verify;
//     the request of a client without one is then refused with 403 (no
//     HTTP challenge exists for a certificate).
//  2. client-basic-auth: one of the listed user:password pairs (401 with
//     WWW-Authenticate otherwise).
//
// The one exception is fixed, not configurable: GET (and HEAD) of exactly
// LivenessPath and ReadinessPath (ProbePaths), when the handler registered
// there for GET serves it, is served to every client, because the
// kubelet's httpGet probes send no credentials and no certificate. Such a
// request is marked Anonymous when it lacked valid credentials, so that the
// probe answers it no more than its state. There are no default
// credentials.
//
// A handler that must not be served to unauthenticated clients (one that
// changes state, say) asks Authenticates(its HTTPHandlers dep): true only
// when the server lets a request through after client-basic-auth or a
// verified client certificate, the probes aside (ClientAuthenticator,
// implemented by Plugin; HTTPHandlers itself is unchanged, so fakes need
// nothing new).
// Such a handler is registered anyway and refuses (403) naming
// ClientAuthKeys, so that the client learns how to enable it. ClientOf(r)
// tells who sent r: the basic-auth user the server checked, the subject
// common name of the client certificate it verified, and the remote
// address; a basic-auth header the server did not check names nobody.
//
// GET / lists every registered endpoint: JSON ({"endpoints": [{"method",
// "path", "description"}]}) unless the client's Accept header prefers
// text/html (no Accept header, */* and application/json get the JSON).
// Every request is logged at debug level.
//
// # The HTML index page (a hook for one plugin)
//
// A client that prefers HTML gets, by default, a table of the endpoints
// (each GET without {variables} a link: Endpoint.Linkable). A plugin may
// serve its own page there instead (contiv-agent: IPAM's status page), in
// this order:
//  1. In Init or AfterInit call SetIndexPage(its HTTPHandlers dep, fn)
//     (false when the HTTPHandlers does not implement IndexPageSetter: a
//     fake; then nothing is served). One page per server: a later call
//     replaces the page, and fn nil restores the table.
//  2. fn(w, r, endpoints) is called on each request's goroutine with the
//     endpoints the JSON index lists, sorted by path, then method. It
//     writes the whole answer (status, Content-Type text/html, body;
//     Formatter.HTML does it for an html/template). Keep it quick and
//     safe for concurrent use: take a snapshot of the plugin's state, do
//     not wait on its event loop for long, and escape every value
//     (html/template), as names come from clients. The page must stand
//     alone: no scripts or styles from elsewhere.
//  3. The JSON index is not the page's: it stays what it is, so REST
//     clients are not affected by any page.
//
// infra/rest imports no plugin: the plugin calls the hook, never the
// other way.
package rest
