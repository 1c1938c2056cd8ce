package main

import (
	"bytes"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// result is what one run of contiv-netctl did.
type result struct {
	code           int
	stdout, stderr string
}

// netctl runs contiv-netctl with args, the environment env (nothing else
// of the process's) and stdin.
func netctl(t *testing.T, env map[string]string, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	code := run(t.Context(), args, &cmdIO{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb, env: lookup})
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// request is one request the fake agent received.
type request struct {
	method, path, query string
	header              http.Header
	body                string
}

// fakeAgent serves the checkpoint and conflicts calls as the agent
// would, with the replies a test sets, and records every request.
type fakeAgent struct {
	*httptest.Server
	mu       sync.Mutex
	requests []request
	// status and body of GET and POST /contiv/v1/ipam/checkpoint.
	exportStatus int
	exportBody   string
	importStatus int
	importBody   string
	// replies of the other calls by "METHOD path"; a call without one
	// is 404.
	replies map[string]fakeReply
	// handlers answer "METHOD path" from the request, before replies.
	handlers map[string]func(request) fakeReply
	delay    time.Duration
}

// fakeReply is the status and body of one call of the fake agent.
type fakeReply struct {
	status int
	body   string
}

func newFakeAgent(t *testing.T) *fakeAgent {
	t.Helper()
	f := fakeDefaults()
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

// newFakeTLSAgent is newFakeAgent over HTTPS, unstarted: the test sets
// its TLS config and starts it.
func newFakeTLSAgent(t *testing.T) *fakeAgent {
	t.Helper()
	f := fakeDefaults()
	f.Server = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

// fakeDefaults is a fake agent, without its server, that answers every
// call with success.
func fakeDefaults() *fakeAgent {
	return &fakeAgent{exportStatus: http.StatusOK, exportBody: sampleDoc, importStatus: http.StatusOK,
		importBody: `{"imported": 2, "skipped": 0, "skippedReasons": []}`,
		replies: map[string]fakeReply{
			"GET " + conflictsPath:        {http.StatusOK, sampleConflicts},
			"POST " + restoreConflictPath: {http.StatusOK, `{"conflict": "default/web-0", "restored": true, "detail": "default/web-0 of pod default/web-0 holds 10.1.1.9 again"}`},
			"POST " + discardConflictPath: {http.StatusOK, `{"conflict": "default/web-0", "discarded": true}`},
		}}
}

// handle makes fn answer method path.
func (f *fakeAgent) handle(method, path string, fn func(request) fakeReply) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.handlers == nil {
		f.handlers = map[string]func(request) fakeReply{}
	}
	f.handlers[method+" "+path] = fn
}

// reply sets the reply of method path.
func (f *fakeAgent) reply(method, path string, status int, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.replies[method+" "+path] = fakeReply{status, body}
}

func (f *fakeAgent) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	req := request{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery, header: r.Header.Clone(), body: string(body)}
	f.mu.Lock()
	f.requests = append(f.requests, req)
	status, reply, delay := f.exportStatus, f.exportBody, f.delay
	if r.Method == http.MethodPost {
		status, reply = f.importStatus, f.importBody
	}
	other, found := f.replies[r.Method+" "+r.URL.Path]
	handler := f.handlers[r.Method+" "+r.URL.Path]
	f.mu.Unlock()
	if handler != nil {
		other, found = handler(req), true
	}
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	switch {
	case found:
		status, reply = other.status, other.body
	case r.URL.Path != checkpointPath:
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, reply)
}

// received are the requests so far.
func (f *fakeAgent) received() []request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]request(nil), f.requests...)
}

// basic is the Authorization header of basic authentication.
func basic(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

// sampleDoc is a checkpoint document as the agent writes it.
const sampleDoc = `{
  "version": "contiv-ipam/2",
  "node": "worker-1",
  "takenAt": "2026-11-25T14:50:00Z",
  "allocations": [
    {
      "network": "net",
      "containerId": "c1",
      "ifName": "eth0",
      "pod": {
        "name": "web-0",
        "namespace": "default"
      },
      "ips": [
        "10.1.1.2",
        "fd00:10:1:1::2"
      ],
      "pools": [
        "10.1.1.0/24",
        "fd00:10:1:1::/64"
      ]
    },
    {
      "owner": "router",
      "seq": 1,
      "ips": [
        "10.1.1.3"
      ]
    }
  ]
}
`

// sampleConflicts is GET /contiv/v1/ipam/conflicts as the agent answers
// it: a pod-keyed record outside the node's pools, and an
// attachment-keyed dual-stack one that lost a clash.
const sampleConflicts = `{"conflicts": [
  {"name": "default/web-0", "PodID": {"Name": "web-0", "Namespace": "default"}, "ip": "9.9.9.9",
   "keptFor": "", "reason": "9.9.9.9 is not in a pod subnet or pool of this node (10.1.1.0/24)",
   "at": "2026-11-25T14:50:00Z", "key": "/contiv-agent/ipam/pods/default/web-0", "value": "9.9.9.9"},
  {"name": "attachments/net/c2/eth0", "PodID": {"Name": "db-1", "Namespace": "prod"}, "ip": "10.1.1.7",
   "ips": ["10.1.1.7", "fd00:10:1:1::7"], "keptFor": "prod/db-0", "reason": "10.1.1.7 is held by prod/db-0",
   "at": "2026-11-25T14:51:02Z", "key": "/contiv-agent/ipam/attachments/net/c2/eth0",
   "value": "{\"ips\":[\"10.1.1.7\",\"fd00:10:1:1::7\"]}", "network": "net", "containerId": "c2", "ifName": "eth0"}
]}
`
