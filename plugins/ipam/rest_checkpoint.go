package ipam

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/contiv-ipam/agent/infra/rest"
	"github.com/contiv-ipam/agent/plugins/ipam/checkpoint"
)

// The checkpoint calls: GET exports every allocation of this node as a
// checkpoint document (plugins/ipam/checkpoint), POST imports one
// (ImportCheckpoint). The export reveals every pod of the node and the
// import replaces its state, so both are served only by a REST server
// that authenticates every client (rest.Authenticates), as the operator
// calls (rest_operator.go): otherwise 403 naming the http.conf keys. Each
// call is logged at Info with who asked (rest.ClientOf), its status and
// its counts, before the reply is sent; refusals have the operator calls'
// body, {"error", "reason"}.
//
// GET is refused, in this order: 403 without client authentication, 503
// before the first resync. Its reply is the Encode'd document, as a file
// (Content-Disposition: attachment; filename="contiv-ipam-<node>-<UTC
// time>.json").
//
// POST ?replace=true|false (absent: false) is refused, in this order: 403
// without client authentication, 415 unless Content-Type is
// application/json, 400 for a bad query, 413 over 16 MiB, 400 for a
// document Decode refuses (the error names the entry, the field and the
// value), 409 newer-version for a document of a newer format, 503 before
// the first resync or once the node ID is lost, then by ImportCheckpoint (checkpointStatus): 409
// not-empty when the node holds allocations and replace is false. It
// answers once the records are durable and IPAM has resynced.
const CheckpointPath = "/contiv/v1/ipam/checkpoint"

// maxCheckpointBody bounds an imported document; a longer one is 413.
const maxCheckpointBody = 16 << 20

// CheckpointImport is the reply of POST /contiv/v1/ipam/checkpoint: the
// entries stored, and those skipped (outside this node's pod subnets, a
// key this node refuses) with why, each naming its index in the document.
type CheckpointImport struct {
	Imported       int      `json:"imported"`
	Skipped        int      `json:"skipped"`
	SkippedReasons []string `json:"skippedReasons"`
}

// registerCheckpointHandlers registers the checkpoint calls, whether or
// not the server authenticates its clients (they answer 403 then).
func (p *Plugin) registerCheckpointHandlers() {
	rest.RegisterDescribed(p.HTTP, CheckpointPath,
		"GET: export every allocation of this node as a checkpoint document; POST ?replace=true|false: import one "+
			"(409 when the node holds allocations and replace is false); needs client authentication",
		p.checkpointHandler, http.MethodGet, http.MethodPost)
}

// errCheckpointNoClientAuth refuses a checkpoint call on a server that
// does not authenticate its clients.
var errCheckpointNoClientAuth = fmt.Errorf("the checkpoint calls reveal and replace every allocation of the node "+
	"and need client authentication; set %s in http.conf", rest.ClientAuthKeys)

// checkpointCall is what a checkpoint call logs.
type checkpointCall struct {
	op      string // "export", "import"
	replace bool
	doc     checkpoint.Data // the document exported or imported
	body    []byte          // the document exported
	bytes   int
	result  ImportResult
}

func (p *Plugin) checkpointHandler(f *rest.Formatter) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		call := checkpointCall{op: "export"}
		if r.Method == http.MethodPost {
			call.op = "import"
		}
		var err error
		if !rest.Authenticates(p.HTTP) {
			err = &refusal{http.StatusForbidden, "forbidden", errCheckpointNoClientAuth}
		} else if call.op == "export" {
			err = p.serveExport(&call)
		} else {
			err = p.serveImport(&call, w, r)
		}
		if err != nil {
			status, reason := checkpointStatus(err)
			p.logCheckpoint(&call, rest.ClientOf(r), status, err)
			f.JSON(w, status, OperatorError{Error: err.Error(), Reason: reason})
			return
		}
		// Logged before the reply: a client that has it finds it in the log.
		p.logCheckpoint(&call, rest.ClientOf(r), http.StatusOK, nil)
		if call.op == "export" {
			p.writeExport(w, &call)
			return
		}
		reasons := call.result.SkippedReasons
		if reasons == nil {
			reasons = []string{}
		}
		f.JSON(w, http.StatusOK, CheckpointImport{Imported: call.result.Imported, Skipped: call.result.Skipped, SkippedReasons: reasons})
	}
}

// serveExport takes the document; the handler writes it.
func (p *Plugin) serveExport(call *checkpointCall) error {
	if p.st.Load() == nil {
		return p.notReady()
	}
	d, err := p.ExportCheckpoint()
	if err != nil {
		return fmt.Errorf("exporting the checkpoint: %w", err)
	}
	body, err := checkpoint.Encode(d)
	if err != nil {
		return fmt.Errorf("exporting the checkpoint: %w", err)
	}
	call.doc, call.body = d, body
	return nil
}

// writeExport writes the exported document as a file download.
func (p *Plugin) writeExport(w http.ResponseWriter, call *checkpointCall) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", checkpointFileName(call.doc.Node, call.doc.TakenAt)))
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(call.body); err != nil {
		p.Log.Debug("writing the checkpoint failed", "error", err)
	}
}

// checkpointFileName is the file name GET suggests:
// contiv-ipam-<node>-<UTC time, 20060102T150405Z>.json, the node name
// kept to letters, digits, '.', '_' and '-' (others are '_').
func checkpointFileName(node string, at time.Time) string {
	safe := strings.Map(func(c rune) rune {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' {
			return c
		}
		return '_'
	}, node)
	if safe == "" {
		safe = "node"
	}
	return "contiv-ipam-" + safe + "-" + at.UTC().Format("20060102T150405Z") + ".json"
}

// serveImport decodes the document and imports it.
func (p *Plugin) serveImport(call *checkpointCall, w http.ResponseWriter, r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		return &refusal{http.StatusUnsupportedMediaType, "unsupported-media", fmt.Errorf("Content-Type %s: %w", quote(ct), errNotJSON)}
	}
	replace, err := boolQuery(r.URL.Query(), "replace", "import")
	if err != nil {
		return &refusal{http.StatusBadRequest, "bad-request", err}
	}
	call.replace = replace
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxCheckpointBody))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return &refusal{http.StatusRequestEntityTooLarge, "too-large", fmt.Errorf("body: longer than %d bytes", maxCheckpointBody)}
	case err != nil:
		return &refusal{http.StatusBadRequest, "bad-request", fmt.Errorf("body: reading: %w", err)}
	}
	call.bytes = len(body)
	d, err := checkpoint.Decode(body)
	if err != nil {
		return err
	}
	call.doc = d
	if p.st.Load() == nil {
		return p.notReady()
	}
	// As an operator allocation: not into subnets cut with a node ID
	// nodesync no longer holds.
	if err := p.checkNodeID(); err != nil {
		return err
	}
	call.result, err = p.ImportCheckpoint(d, replace)
	return err
}

// boolQuery reads a query that may hold one parameter, name, at most
// once, "true" or "false" (absent: false); anything else is refused,
// naming call (the call that takes it).
func boolQuery(q url.Values, name, call string) (bool, error) {
	for k := range q {
		if k != name {
			return false, fmt.Errorf("query: unknown parameter %s (the %s takes %q)", quote(k), call, name)
		}
	}
	vs := q[name]
	switch {
	case len(vs) == 0:
		return false, nil
	case len(vs) > 1:
		return false, fmt.Errorf("query: %q given twice", name)
	case vs[0] == "true":
		return true, nil
	case vs[0] == "false":
		return false, nil
	}
	return false, fmt.Errorf("query: %s=%s: want true or false", name, quote(vs[0]))
}

// checkpointStatus maps the error of a checkpoint call to its status and
// reason:
//
//	403 forbidden          the server does not authenticate its clients
//	415 unsupported-media  Content-Type is not application/json (import)
//	413 too-large          body over 16 MiB
//	400 bad-request        a bad query, a document Decode refuses
//	409 newer-version      a document of a newer version of the format
//	409 not-empty          the node holds allocations and replace is false
//	409 external-ipam      the node's pod addresses come from an external
//	                       IPAM: nothing is imported
//	503 not-ready          no resync yet, or IPAM is closing
//	503 node-id-lost       nodesync no longer holds the node ID the pod
//	                       subnets were cut with (import)
//	500 internal           anything else (a store failure)
func checkpointStatus(err error) (int, string) {
	switch {
	case errors.Is(err, checkpoint.ErrInvalid):
		return http.StatusBadRequest, "bad-request"
	case errors.Is(err, checkpoint.ErrNewerVersion):
		return http.StatusConflict, "newer-version"
	case errors.Is(err, ErrNotEmpty):
		return http.StatusConflict, "not-empty"
	case errors.Is(err, ErrExternalIPAM):
		return http.StatusConflict, "external-ipam"
	}
	return operatorStatus(err)
}

// logCheckpoint logs one checkpoint call at Info (a refusal for want of
// client authentication at Warn): the call, its status, the document's
// node, time and size, the counts or the error, and who asked.
func (p *Plugin) logCheckpoint(c *checkpointCall, who rest.Client, status int, err error) {
	attrs := []any{"op", c.op}
	if c.op == "import" {
		attrs = append(attrs, "replace", c.replace)
	}
	attrs = append(attrs, "status", status)
	if n := max(c.bytes, len(c.body)); n > 0 {
		attrs = append(attrs, "bytes", n)
	}
	if c.doc.Version != "" {
		attrs = append(attrs, "node", c.doc.Node, "taken-at", c.doc.TakenAt.Format(time.RFC3339Nano), "allocations", len(c.doc.Allocations))
	}
	if c.op == "import" && err == nil {
		attrs = append(attrs, "imported", c.result.Imported, "skipped", c.result.Skipped)
		if len(c.result.SkippedReasons) > 0 {
			attrs = append(attrs, "skipped-reasons", c.result.SkippedReasons)
		}
	}
	if err != nil {
		attrs = append(attrs, "error", err.Error())
	}
	attrs = append(attrs, "user", who.User, "cert-cn", who.CertCN, "remote", who.Remote)
	switch {
	case status == http.StatusForbidden:
		p.Log.Warn("checkpoint call refused: the REST server does not authenticate its clients", attrs...)
	case err != nil:
		p.Log.Info("checkpoint call failed", attrs...)
	default:
		p.Log.Info("checkpoint call", attrs...)
	}
}
