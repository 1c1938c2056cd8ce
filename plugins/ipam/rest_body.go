package ipam

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/contiv-ipam/agent/plugins/ipam/keeper"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// This file decodes the bodies of the operator calls (rest_operator.go)
// strictly: one JSON object whose keys are exactly (case included) fields
// the call takes, each once, each a JSON string whose value is checked
// here; nothing after the object. Every error names the field and quotes
// the value (cut to maxQuoted bytes).

// opField is one field of an operator body; a set of them is a mask.
type opField uint8

// The fields.
const (
	fieldIP opField = 1 << iota
	fieldFamily
	fieldOwner
	fieldTimeout
	fieldUUID
	fieldConflict
	fieldPod
	fieldUID
)

// opFields lists the fields in the order errors name them.
var opFields = []struct {
	f    opField
	name string
}{
	{fieldIP, "ip"}, {fieldFamily, "family"}, {fieldOwner, "owner"}, {fieldTimeout, "timeout"}, {fieldUUID, "uuid"},
	{fieldConflict, "conflict"}, {fieldPod, "pod"}, {fieldUID, "uid"},
}

// fieldOf is the field named name, 0 when none is.
func fieldOf(name string) opField {
	for _, f := range opFields {
		if f.name == name {
			return f.f
		}
	}
	return 0
}

// names lists the fields of mask m: `"ip", "owner"`.
func (m opField) names() string {
	var out []string
	for _, f := range opFields {
		if m&f.f != 0 {
			out = append(out, fmt.Sprintf("%q", f.name))
		}
	}
	return strings.Join(out, ", ")
}

// Limits of the operator bodies.
const (
	// maxOperatorBody bounds a body; a longer one is 413.
	maxOperatorBody = 64 << 10
	// maxQuoted bounds a value quoted in an error, in bytes.
	maxQuoted = 80
)

// operatorRequest is a decoded operator body: set lists the fields
// present; the others are zero.
type operatorRequest struct {
	set      opField
	ip       netip.Addr // unmapped, without zone
	family   Family     // "" = every family of the node
	owner    string
	timeout  time.Duration // > 0
	uuid     string        // canonical (lower case, hyphens)
	conflict string        // the name of a record moved aside
	force    bool          // release: ?force=true, CNI attachments too
	pod      string        // release: "namespace/name", checked by checkRelease
	uid      string        // release: the pod's UID (with pod only)
}

// has tells whether every field of m is present.
func (r *operatorRequest) has(m opField) bool { return r.set&m == m }

// errBadBody is wrapped by every error of decodeOperatorBody.
var errBadBody = errors.New("bad request body")

// bodyError is a refused body: the field at fault ("" for the body as a
// whole) and why.
type bodyError struct {
	field string
	msg   string
}

func (e *bodyError) Error() string {
	if e.field == "" {
		return "body: " + e.msg
	}
	return fmt.Sprintf("field %q: %s", e.field, e.msg)
}

func (e *bodyError) Unwrap() error { return errBadBody }

// decodeOperatorBody decodes body, which may hold the fields of accepted
// (op names the call in errors).
func decodeOperatorBody(body []byte, op string, accepted opField) (operatorRequest, error) {
	var req operatorRequest
	if len(bytes.TrimSpace(body)) == 0 {
		return req, &bodyError{msg: fmt.Sprintf("empty: want a JSON object with %s", accepted.names())}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return req, &bodyError{msg: "want a JSON object, got " + describeJSON(tok, err)}
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return req, &bodyError{msg: "invalid JSON: " + err.Error()}
		}
		name, _ := tok.(string) // object keys are strings
		f := fieldOf(name)
		switch {
		case f == 0 || accepted&f == 0:
			return req, &bodyError{msg: fmt.Sprintf("unknown field %s (%s takes %s)", quote(name), op, accepted.names())}
		case req.set&f != 0:
			return req, &bodyError{field: name, msg: "given twice"}
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return req, &bodyError{field: name, msg: "invalid JSON: " + err.Error()}
		}
		var s string
		if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
			return req, &bodyError{field: name, msg: "want a JSON string, got " + cut(string(raw))}
		}
		if err := req.setField(f, name, s); err != nil {
			return req, err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return req, &bodyError{msg: "the JSON object is not closed: " + describeJSON(nil, err)}
	}
	if tok, err := dec.Token(); err != io.EOF {
		return req, &bodyError{msg: "data after the JSON object: " + describeJSON(tok, err)}
	}
	return req, nil
}

// setField checks the value s of field f and records it.
func (r *operatorRequest) setField(f opField, name, s string) error {
	bad := func(why string) error { return &bodyError{field: name, msg: quote(s) + " " + why} }
	switch f {
	case fieldIP:
		a, err := netip.ParseAddr(s)
		switch {
		case err != nil:
			return bad("is not an IP address")
		case a.Zone() != "":
			return bad("has a zone: want an address without one")
		}
		r.ip = a.Unmap()
	case fieldFamily:
		switch Family(s) {
		case IPv4, IPv6, "":
			r.family = Family(s)
		default:
			return bad(fmt.Sprintf("is not a family: want %q, %q or \"\" (every family of the node)", IPv4, IPv6))
		}
	case fieldOwner:
		if err := keeper.CheckOwner(s); err != nil {
			return bad(err.Error())
		}
		r.owner = s
	case fieldTimeout:
		d, err := time.ParseDuration(s)
		switch {
		case err != nil:
			return bad(`is not a duration: want one such as "30s" or "5m"`)
		case d <= 0:
			return bad("is not positive")
		}
		r.timeout = d
	case fieldUUID:
		id, err := uuid.Parse(s)
		if err != nil {
			return bad("is not a UUID")
		}
		r.uuid = id.String()
	case fieldConflict:
		if err := checkConflictName(s); err != nil {
			return bad(err.Error())
		}
		r.conflict = s
	case fieldPod:
		r.pod = s
	case fieldUID:
		if s == "" || len(s) > podmanager.MaxPodUID || strings.ContainsFunc(s, func(c rune) bool { return !unicode.IsPrint(c) || unicode.IsSpace(c) }) {
			return bad(fmt.Sprintf("is not a pod UID: want 1 to %d printable characters without white space", podmanager.MaxPodUID))
		}
		r.uid = s
	}
	r.set |= f
	return nil
}

// checkConflictName says what is wrong with the name of a record moved
// aside (its key under the conflicts prefix): empty, too long, not UTF-8,
// or a path that climbs.
func checkConflictName(s string) error {
	switch {
	case s == "":
		return errors.New("is empty: want the name GET /contiv/v1/ipam/conflicts lists")
	case len(s) > 4096:
		return errors.New("is longer than 4096 bytes")
	case !utf8.ValidString(s):
		return errors.New("is not UTF-8")
	case strings.Contains(s, "..") || strings.HasPrefix(s, "/"):
		return errors.New(`is not a conflict name: it has ".." or starts with "/"`)
	}
	return nil
}

// describeJSON names what a decoder read instead of what was wanted.
func describeJSON(tok json.Token, err error) string {
	switch {
	case err == io.EOF, errors.Is(err, io.ErrUnexpectedEOF):
		return "the end of the body"
	case err != nil:
		return err.Error()
	case tok == nil:
		return "null"
	}
	return cut(fmt.Sprint(tok))
}

// quote quotes s for an error, cut to maxQuoted bytes.
func quote(s string) string {
	if len(s) > maxQuoted {
		return fmt.Sprintf("%q...", strings.ToValidUTF8(s[:maxQuoted], ""))
	}
	return fmt.Sprintf("%q", s)
}

// cut cuts s to maxQuoted bytes for an error.
func cut(s string) string {
	if len(s) > maxQuoted {
		return strings.ToValidUTF8(s[:maxQuoted], "") + "..."
	}
	return s
}
