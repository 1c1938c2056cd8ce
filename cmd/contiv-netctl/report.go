package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The report of "ipam check -o json": the agent's release candidates, the
// node it serves and when they were taken, saved for review; "ipam
// release -from-report" reads it back and checks every field it uses
// before anything is released.

// reportVersion is the format of a report; a report of another is
// refused.
const reportVersion = "contiv-netctl/release-report/1"

// report is the document of "ipam check -o json": ipam.ReleaseCandidates
// (running, gracePeriod, candidates) and what identifies where and when
// it was taken.
type report struct {
	Version string `json:"version"`
	Server  string `json:"server"`  // the -server it was taken from
	Node    string `json:"node"`    // the node the agent serves
	NodeID  uint32 `json:"nodeId"`  // its node ID then
	TakenAt string `json:"takenAt"` // RFC 3339, UTC, this machine's clock
	candidateList
}

// reportPod is one candidate of a checked report: its pod and addresses.
type reportPod struct {
	pod   string // "namespace/name"
	uid   string // its UID ("" when the agent did not know one)
	addrs []netip.Addr
}

// checkedReport is a report whose fields were checked.
type checkedReport struct {
	node, takenAt string
	pods          []reportPod
}

// The fields of a report and of a candidate.
var (
	reportFields    = []string{"version", "server", "node", "nodeId", "takenAt", "running", "blocked", "gracePeriod", "candidates"}
	candidateFields = []string{"pod", "uid", "ips", "missingSince", "releaseAt"}
)

// fieldError is a field of a report that is wrong: its path
// ("candidates[1].ips[0]") and what is wrong, quoting the value.
type fieldError struct {
	path, msg string
}

func (e *fieldError) Error() string {
	if e.path == "" {
		return e.msg
	}
	return fmt.Sprintf("field %q: %s", e.path, e.msg)
}

// decodeReport decodes and checks a report: one JSON object of the
// report's fields, with the right version, a node, and every candidate a
// pod ("namespace/name") and its addresses (each listed once).
func decodeReport(data []byte) (*checkedReport, error) {
	raw, err := oneValue(data)
	if err != nil {
		return nil, err
	}
	top, err := object("", raw, reportFields)
	if err != nil {
		return nil, err
	}
	var rep checkedReport
	version, err := top.str("version", true)
	switch {
	case err != nil:
		return nil, err
	case version != reportVersion:
		return nil, &fieldError{"version", fmt.Sprintf("%s: want %q (a report of \"contiv-netctl ipam check -o json\")", show(top["version"]), reportVersion)}
	}
	if rep.node, err = top.str("node", true); err != nil {
		return nil, err
	}
	if rep.takenAt, err = top.str("takenAt", false); err != nil {
		return nil, err
	}
	if err := top.typed("server", "string", "nodeId", "number", "running", "bool", "blocked", "string", "gracePeriod", "string"); err != nil {
		return nil, err
	}
	if rep.pods, err = decodeCandidates(top["candidates"]); err != nil {
		return nil, err
	}
	return &rep, nil
}

// oneValue is the one JSON value of data, with nothing after it.
func oneValue(data []byte) (json.RawMessage, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, &fieldError{msg: "empty: want the JSON report of \"contiv-netctl ipam check -o json\""}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, &fieldError{msg: "not JSON: " + err.Error()}
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &fieldError{msg: fmt.Sprintf("data after the JSON report, at byte %d", dec.InputOffset())}
	}
	return raw, nil
}

// decodeCandidates checks the candidates of a report.
func decodeCandidates(raw json.RawMessage) ([]reportPod, error) {
	if raw == nil {
		return nil, &fieldError{"candidates", "missing"}
	}
	var list []json.RawMessage
	if kind(raw) != '[' || json.Unmarshal(raw, &list) != nil {
		return nil, &fieldError{"candidates", "want a JSON array, got " + show(raw)}
	}
	seen := map[netip.Addr]string{} // address -> where it is listed
	var pods []reportPod
	for i, item := range list {
		path := fmt.Sprintf("candidates[%d]", i)
		c, err := object(path, item, candidateFields)
		if err != nil {
			return nil, err
		}
		p, err := decodeCandidate(path, c, seen)
		if err != nil {
			return nil, err
		}
		pods = append(pods, p)
	}
	return pods, nil
}

// decodeCandidate checks one candidate; seen holds the addresses listed
// before it.
func decodeCandidate(path string, c rawObject, seen map[netip.Addr]string) (reportPod, error) {
	var p reportPod
	var err error
	if p.pod, err = c.str(path+".pod", true); err != nil {
		return p, err
	}
	if err := checkPod(p.pod); err != nil {
		return p, &fieldError{path + ".pod", fmt.Sprintf("%q %v", p.pod, err)}
	}
	if p.uid, err = c.str(path+".uid", false); err != nil {
		return p, err
	}
	if err := c.typed(path+".missingSince", "string", path+".releaseAt", "string"); err != nil {
		return p, err
	}
	ips, ok := c["ips"]
	var list []json.RawMessage
	switch {
	case !ok:
		return p, &fieldError{path + ".ips", "missing"}
	case kind(ips) != '[' || json.Unmarshal(ips, &list) != nil:
		return p, &fieldError{path + ".ips", "want a JSON array of addresses, got " + show(ips)}
	}
	for j, item := range list {
		at := fmt.Sprintf("%s.ips[%d]", path, j)
		a, err := decodeAddr(at, item)
		if err != nil {
			return p, err
		}
		if prev, dup := seen[a]; dup {
			return p, &fieldError{at, fmt.Sprintf("%q is listed twice (%s too)", a, prev)}
		}
		seen[a] = at
		p.addrs = append(p.addrs, a)
	}
	return p, nil
}

// decodeAddr checks one address of a candidate.
func decodeAddr(path string, raw json.RawMessage) (netip.Addr, error) {
	var s string
	if kind(raw) != '"' || json.Unmarshal(raw, &s) != nil {
		return netip.Addr{}, &fieldError{path, "want a JSON string, got " + show(raw)}
	}
	a, err := netip.ParseAddr(s)
	switch {
	case err != nil:
		return netip.Addr{}, &fieldError{path, fmt.Sprintf("%q is not an IP address", s)}
	case a.Zone() != "":
		return netip.Addr{}, &fieldError{path, fmt.Sprintf("%q has a zone: want an address without one", s)}
	}
	return a.Unmap(), nil
}

// maxPodName bounds a pod name: a namespace (63 bytes), "/", a name (253),
// as the agent's release call does.
const maxPodName = 63 + 1 + 253

// checkPod says what is wrong with a pod's "namespace/name", by the rules
// of the agent's release call.
func checkPod(s string) error {
	ns, name, ok := strings.Cut(s, "/")
	switch {
	case !ok || ns == "" || name == "" || strings.Contains(name, "/"):
		return errors.New(`is not a pod: want "namespace/name"`)
	case len(s) > maxPodName:
		return fmt.Errorf("is longer than %d bytes", maxPodName)
	case !utf8.ValidString(s):
		return errors.New("is not UTF-8")
	case strings.IndexFunc(s, func(c rune) bool { return !unicode.IsPrint(c) || unicode.IsSpace(c) }) >= 0:
		return errors.New("has a space or a character that is not printable")
	}
	return nil
}

// rawObject is a JSON object's fields, not decoded yet.
type rawObject map[string]json.RawMessage

// object decodes raw, at path, as an object of the fields known (an
// unknown one is an error).
func object(path string, raw json.RawMessage, known []string) (rawObject, error) {
	var o rawObject
	if kind(raw) != '{' || json.Unmarshal(raw, &o) != nil {
		return nil, &fieldError{path, "want a JSON object, got " + show(raw)}
	}
	names := make([]string, 0, len(o))
	for name := range o {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !slices.Contains(known, name) {
			return nil, &fieldError{path, fmt.Sprintf("unknown field %q (a report has %s)", name, strings.Join(known, ", "))}
		}
	}
	return o, nil
}

// str is the string field at path (its last part is the name in o);
// missing is an error when required, "" otherwise.
func (o rawObject) str(path string, required bool) (string, error) {
	raw, ok := o[path[strings.LastIndex(path, ".")+1:]]
	if !ok {
		if required {
			return "", &fieldError{path, "missing"}
		}
		return "", nil
	}
	var s string
	if kind(raw) != '"' || json.Unmarshal(raw, &s) != nil {
		return "", &fieldError{path, "want a JSON string, got " + show(raw)}
	}
	if s == "" && required {
		return "", &fieldError{path, `"" is empty`}
	}
	return s, nil
}

// typed checks the types of optional fields: pairs of a path and
// "string", "number" or "bool".
func (o rawObject) typed(pairs ...string) error {
	want := map[string]byte{"string": '"', "number": '0', "bool": 't'}
	for i := 0; i+1 < len(pairs); i += 2 {
		path, typ := pairs[i], pairs[i+1]
		raw, ok := o[path[strings.LastIndex(path, ".")+1:]]
		if ok && kind(raw) != want[typ] {
			return &fieldError{path, fmt.Sprintf("want a JSON %s, got %s", typ, show(raw))}
		}
	}
	return nil
}

// kind is the kind of a JSON value: '{', '[', '"', '0' (a number), 't'
// (true or false), 'n' (null).
func kind(raw json.RawMessage) byte {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return 0
	}
	switch c := raw[0]; {
	case c == '-' || (c >= '0' && c <= '9'):
		return '0'
	case c == 'f':
		return 't'
	default:
		return c
	}
}

// show is a JSON value for an error, cut.
func show(raw json.RawMessage) string {
	return cut(string(bytes.TrimSpace(raw)))
}
