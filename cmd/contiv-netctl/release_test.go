package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/ipam"
)

// fakeAlloc is one allocation of a fake agent: its pod (or owner) and
// addresses.
type fakeAlloc struct {
	pod string
	uid string // "": none known
	ips []string
}

// fakeHoldings answer the release call as the agent does: the allocation
// holding ip is released, with all of its addresses, only if pod holds
// it; another's is 409 moved, a free address 404 not-allocated. fail
// makes the release of an address fail with 500.
type fakeHoldings struct {
	mu     sync.Mutex
	allocs []fakeAlloc
	fail   map[string]bool
}

func (h *fakeHoldings) release(r request) fakeReply {
	var body struct{ IP, Pod, UID string }
	dec := json.NewDecoder(strings.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || r.query != "force=true" || body.Pod == "" {
		return fakeReply{http.StatusBadRequest, fmt.Sprintf(`{"error": "unexpected request %s?%s", "reason": "bad-request"}`, r.body, r.query)}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fail[body.IP] {
		return fakeReply{http.StatusInternalServerError, `{"error": "store failure", "reason": "internal"}`}
	}
	i := slices.IndexFunc(h.allocs, func(a fakeAlloc) bool { return slices.Contains(a.ips, body.IP) })
	switch {
	case i < 0:
		return fakeReply{http.StatusNotFound, fmt.Sprintf(`{"error": "releasing %s of pod %s: not allocated", "reason": "not-allocated"}`, body.IP, body.Pod)}
	case h.allocs[i].pod != body.Pod || h.allocs[i].uid != "" && body.UID != "" && h.allocs[i].uid != body.UID:
		return fakeReply{http.StatusConflict, fmt.Sprintf(`{"error": "releasing %s of pod %s: held by another pod or owner: attachment net/c9/eth0 of pod %s holds it", "reason": "moved"}`,
			body.IP, body.Pod, h.allocs[i].pod)}
	}
	ips, _ := json.Marshal(h.allocs[i].ips)
	h.allocs = slices.Delete(h.allocs, i, i+1)
	return fakeReply{http.StatusOK, fmt.Sprintf(`{"ip": %q, "pod": %q, "ips": %s, "released": true}`, body.IP, body.Pod, ips)}
}

// held are the allocations left.
func (h *fakeHoldings) held() []fakeAlloc {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.allocs)
}

// releaseAgent is a fake agent of node worker-1 with allocs.
func releaseAgent(t *testing.T, allocs ...fakeAlloc) (*fakeAgent, *fakeHoldings) {
	t.Helper()
	f := newFakeAgent(t)
	h := &fakeHoldings{allocs: allocs, fail: map[string]bool{}}
	f.reply(http.MethodGet, ipamPath, http.StatusOK, sampleNode)
	f.handle(http.MethodPost, releasePath, h.release)
	return f, h
}

// writeReportFile writes a report of node worker-1 listing candidates (JSON)
// and returns its path.
func writeReportFile(t *testing.T, candidates string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "report.json")
	doc := `{"version": "contiv-netctl/release-report/1", "server": "http://127.0.0.1:9999", "node": "worker-1", "nodeId": 3,
		"takenAt": "2026-11-28T12:05:00Z", "running": true, "gracePeriod": "10m0s", "candidates": ` + candidates + `}`
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// posts are the release calls f received: their bodies.
func posts(f *fakeAgent) []string {
	var out []string
	for _, r := range f.received() {
		if r.method == http.MethodPost {
			out = append(out, r.body)
		}
	}
	return out
}

// Exactly what the report lists, each address only while the pod it
// names holds it: released (both families of one allocation with one
// call), moved to another pod (skipped), free (skipped); another pod's
// allocation and an allocation the report does not list stay.
func TestReleaseFromReport(t *testing.T) {
	g := NewWithT(t)
	f, h := releaseAgent(t,
		fakeAlloc{"default/web-0", "", []string{"10.1.1.5", "fd00:10:1:1::5"}},
		fakeAlloc{"prod/db-2", "", []string{"10.1.1.7"}},
		fakeAlloc{"default/api-0", "", []string{"10.1.1.8"}})
	file := writeReportFile(t, `[
		{"pod": "default/web-0", "ips": ["10.1.1.5", "fd00:10:1:1::5"], "missingSince": "2026-11-28T12:00:00Z", "releaseAt": "2026-11-28T12:10:00Z"},
		{"pod": "prod/db-1", "ips": ["10.1.1.7"]},
		{"pod": "default/old-0", "ips": ["10.1.1.9"]}]`)

	res := netctl(t, nil, "", args(creds(f), "ipam", "release", "-from-report", file)...)
	g.Expect(res.code).To(Equal(exitOK), res.stderr)
	g.Expect(res.stderr).To(BeEmpty())
	g.Expect(res.stdout).To(Equal("released 10.1.1.5 (pod default/web-0)\n" +
		"released fd00:10:1:1::5 (pod default/web-0; with 10.1.1.5)\n" +
		"skipped 10.1.1.7 (pod prod/db-1): moved: releasing 10.1.1.7 of pod prod/db-1: held by another pod or owner: attachment net/c9/eth0 of pod prod/db-2 holds it\n" +
		"skipped 10.1.1.9 (pod default/old-0): free: no allocation holds it\n" +
		"released 2, skipped 2, failed 0 of 4 addresses in " + file + " (node \"worker-1\", taken at 2026-11-28T12:05:00Z)\n"))
	g.Expect(h.held()).To(Equal([]fakeAlloc{{"prod/db-2", "", []string{"10.1.1.7"}}, {"default/api-0", "", []string{"10.1.1.8"}}}))

	g.Expect(posts(f)).To(Equal([]string{`{"ip":"10.1.1.5","pod":"default/web-0"}`, `{"ip":"10.1.1.7","pod":"prod/db-1"}`,
		`{"ip":"10.1.1.9","pod":"default/old-0"}`}), "one call per allocation, each with its pod")
	for _, r := range f.received() {
		g.Expect(r.header.Get("Authorization")).To(Equal(basic("admin", "s3cret")))
		if r.method == http.MethodPost {
			g.Expect(r.query).To(Equal("force=true"))
			g.Expect(r.header.Get("Content-Type")).To(Equal("application/json"))
		}
	}
	g.Expect(f.received()[0].path).To(Equal(ipamPath), "the node is checked first")
}

// The report "ipam check -o json" writes is the one "ipam release" reads,
// from a file or stdin.
func TestReleaseFromTheReportOfCheck(t *testing.T) {
	g := NewWithT(t)
	f, h := releaseAgent(t, fakeAlloc{"default/web-0", "", []string{"10.1.1.5", "fd00:10:1:1::5"}})
	f.reply(http.MethodGet, candidatesPath, http.StatusOK, sampleCandidates)
	res := netctl(t, nil, "", args(creds(f), "ipam", "check", "-o", "json")...)
	g.Expect(res.code).To(Equal(exitOK), res.stderr)

	res = netctl(t, nil, res.stdout, args(creds(f), "ipam", "release", "-from-report", "-")...)
	g.Expect(res.code).To(Equal(exitOK), res.stderr)
	g.Expect(res.stdout).To(HavePrefix("released 10.1.1.5 (pod default/web-0)\n" +
		"released fd00:10:1:1::5 (pod default/web-0; with 10.1.1.5)\n" +
		"skipped 10.1.1.7 (pod prod/db-1): free: no allocation holds it\n" +
		"released 2, skipped 1, failed 0 of 3 addresses in stdin (node \"worker-1\", taken at "))
	g.Expect(h.held()).To(BeEmpty())
}

// A release that fails is reported and the others go on; the exit code
// is 1. An agent that does not take the pod condition refuses every
// release (400): failed, nothing released.
func TestReleaseFailuresExitOne(t *testing.T) {
	g := NewWithT(t)
	f, h := releaseAgent(t, fakeAlloc{"default/web-0", "", []string{"10.1.1.5"}}, fakeAlloc{"default/web-1", "", []string{"10.1.1.6"}})
	h.fail["10.1.1.5"] = true
	file := writeReportFile(t, `[{"pod": "default/web-0", "ips": ["10.1.1.5"]}, {"pod": "default/web-1", "ips": ["10.1.1.6"]}]`)
	res := netctl(t, nil, "", args(creds(f), "ipam", "release", "-from-report", file)...)
	g.Expect(res.code).To(Equal(exitError))
	g.Expect(res.stdout).To(Equal("failed 10.1.1.5 (pod default/web-0): POST " + f.URL + releasePath +
		"?force=true: 500 Internal Server Error: store failure (reason internal)\n" +
		"released 10.1.1.6 (pod default/web-1)\n" +
		"released 1, skipped 0, failed 1 of 2 addresses in " + file + " (node \"worker-1\", taken at 2026-11-28T12:05:00Z)\n"))
	g.Expect(res.stderr).To(Equal("contiv-netctl: ipam release: 1 of 2 addresses failed (see above)\n"))
	g.Expect(h.held()).To(Equal([]fakeAlloc{{"default/web-0", "", []string{"10.1.1.5"}}}))

	old := newFakeAgent(t)
	old.reply(http.MethodGet, ipamPath, http.StatusOK, sampleNode)
	old.reply(http.MethodPost, releasePath, http.StatusBadRequest,
		`{"error": "body: unknown field \"pod\" (release takes \"ip\", \"owner\")", "reason": "bad-request"}`)
	res = netctl(t, nil, "", args(creds(old), "ipam", "release", "-from-report", file)...)
	g.Expect(res.code).To(Equal(exitError))
	g.Expect(res.stdout).To(ContainSubstring(`failed 10.1.1.5 (pod default/web-0): POST ` + old.URL + releasePath +
		`?force=true: 400 Bad Request: body: unknown field "pod" (release takes "ip", "owner") (the agent may be older than the release with a pod condition)`))
	g.Expect(res.stdout).To(ContainSubstring("released 0, skipped 0, failed 2 of 2"))
}

// A report of another node is refused before anything is released.
func TestReleaseRefusesAReportOfAnotherNode(t *testing.T) {
	g := NewWithT(t)
	f, h := releaseAgent(t, fakeAlloc{"default/web-0", "", []string{"10.1.1.5"}})
	f.reply(http.MethodGet, ipamPath, http.StatusOK, `{"nodeId": 4, "nodeName": "worker-2"}`)
	file := writeReportFile(t, `[{"pod": "default/web-0", "ips": ["10.1.1.5"]}]`)
	res := netctl(t, nil, "", args(creds(f), "ipam", "release", "-from-report", file)...)
	g.Expect(res.code).To(Equal(exitError))
	g.Expect(res.stdout).To(BeEmpty())
	g.Expect(res.stderr).To(Equal("contiv-netctl: ipam release: " + file + ` is a report of node "worker-1"; the agent at ` + f.URL +
		` serves node "worker-2"; nothing released` + "\n"))
	g.Expect(posts(f)).To(BeEmpty())
	g.Expect(h.held()).To(HaveLen(1))

	f.reply(http.MethodGet, ipamPath, http.StatusServiceUnavailable, `{"error": "IPAM is not initialised yet: no resync processed", "reason": "not-ready"}`)
	res = netctl(t, nil, "", args(creds(f), "ipam", "release", "-from-report", file)...)
	g.Expect(res.code).To(Equal(exitError))
	g.Expect(res.stderr).To(HavePrefix("contiv-netctl: ipam release: which node the agent serves: GET " + f.URL + ipamPath + ": 503 Service Unavailable"))
	g.Expect(res.stderr).To(HaveSuffix("; nothing released\n"))
	g.Expect(posts(f)).To(BeEmpty())
}

// A report without candidates releases nothing and asks nothing.
func TestReleaseFromAnEmptyReport(t *testing.T) {
	g := NewWithT(t)
	f, _ := releaseAgent(t)
	file := writeReportFile(t, `[]`)
	res := netctl(t, nil, "", args(creds(f), "ipam", "release", "-from-report", file)...)
	g.Expect(res.code).To(Equal(exitOK), res.stderr)
	g.Expect(res.stdout).To(Equal(file + " lists no release candidates: nothing to release\n"))
	g.Expect(f.received()).To(BeEmpty())
}

// A malformed report is refused naming the field and the value, before
// anything is sent.
func TestReleaseRefusesABadReport(t *testing.T) {
	const head = `{"version": "contiv-netctl/release-report/1", "node": "worker-1", "candidates": `
	web := func(fields string) string {
		return head + `[{"pod": "default/web-0", "ips": ["10.1.1.5"]}, {` + fields + `}]}`
	}
	for _, tc := range []struct{ name, doc, msg string }{
		{"empty", "", `empty: want the JSON report of "contiv-netctl ipam check -o json"`},
		{"not JSON", "POD IPS\nweb-0 10.1.1.5\n", "not JSON: invalid character 'P' looking for beginning of value"},
		{"cut short", head + `[{"pod": "default/web-0"`, "not JSON: unexpected EOF"},
		{"data after it", head + "[]} {}", "data after the JSON report, at byte"},
		{"an array", `[{"pod": "default/web-0"}]`, `want a JSON object, got [{"pod": "default/web-0"}]`},
		{"a checkpoint", sampleDoc, `unknown field "allocations" (a report has version, server, node, nodeId, takenAt, running, blocked, gracePeriod, candidates)`},
		{"the candidates reply", sampleCandidates, `field "version": missing`},
		{"another version", `{"version": "contiv-netctl/release-report/2"}`,
			`field "version": "contiv-netctl/release-report/2": want "contiv-netctl/release-report/1" (a report of "contiv-netctl ipam check -o json")`},
		{"version a number", `{"version": 1}`, `field "version": want a JSON string, got 1`},
		{"no node", `{"version": "contiv-netctl/release-report/1", "candidates": []}`, `field "node": missing`},
		{"empty node", `{"version": "contiv-netctl/release-report/1", "node": "", "candidates": []}`, `field "node": "" is empty`},
		{"nodeId a string", `{"version": "contiv-netctl/release-report/1", "node": "worker-1", "nodeId": "3", "candidates": []}`,
			`field "nodeId": want a JSON number, got "3"`},
		{"running a string", `{"version": "contiv-netctl/release-report/1", "node": "worker-1", "running": "yes", "candidates": []}`,
			`field "running": want a JSON bool, got "yes"`},
		{"no candidates", `{"version": "contiv-netctl/release-report/1", "node": "worker-1"}`, `field "candidates": missing`},
		{"candidates an object", head + `{"pod": "default/web-0"}}`, `field "candidates": want a JSON array, got {"pod": "default/web-0"}`},
		{"candidate a string", head + `["default/web-0"]}`, `field "candidates[0]": want a JSON object, got "default/web-0"`},
		{"candidate null", head + `[null]}`, `field "candidates[0]": want a JSON object, got null`},
		{"unknown field of a candidate", web(`"pod": "a/b", "ips": [], "color": "x"`),
			`field "candidates[1]": unknown field "color" (a report has pod, uid, ips, missingSince, releaseAt)`},
		{"uid a number", web(`"pod": "a/b", "ips": [], "uid": 7`), `field "candidates[1].uid": want a JSON string, got 7`},
		{"missing pod", web(`"ips": ["10.1.1.6"]`), `field "candidates[1].pod": missing`},
		{"pod a number", web(`"pod": 42, "ips": ["10.1.1.6"]`), `field "candidates[1].pod": want a JSON string, got 42`},
		{"pod without namespace", web(`"pod": "web-1", "ips": ["10.1.1.6"]`), `field "candidates[1].pod": "web-1" is not a pod: want "namespace/name"`},
		{"pod with a space", web(`"pod": "default/web 1", "ips": ["10.1.1.6"]`), `field "candidates[1].pod": "default/web 1" has a space or a character that is not printable`},
		{"missing ips", web(`"pod": "default/web-1"`), `field "candidates[1].ips": missing`},
		{"ips a string", web(`"pod": "default/web-1", "ips": "10.1.1.6"`), `field "candidates[1].ips": want a JSON array of addresses, got "10.1.1.6"`},
		{"ip a number", web(`"pod": "default/web-1", "ips": [167837958]`), `field "candidates[1].ips[0]": want a JSON string, got 167837958`},
		{"bad ip", web(`"pod": "default/web-1", "ips": ["10.1.1.6", "10.1.1.x"]`), `field "candidates[1].ips[1]": "10.1.1.x" is not an IP address`},
		{"ip with a zone", web(`"pod": "default/web-1", "ips": ["fe80::1%eth0"]`), `field "candidates[1].ips[0]": "fe80::1%eth0" has a zone: want an address without one`},
		{"ip of two pods", web(`"pod": "default/web-1", "ips": ["10.1.1.6", "::ffff:10.1.1.5"]`),
			`field "candidates[1].ips[1]": "10.1.1.5" is listed twice (candidates[0].ips[0] too)`},
		{"releaseAt a number", web(`"pod": "default/web-1", "ips": [], "releaseAt": 1`), `field "candidates[1].releaseAt": want a JSON string, got 1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			f, _ := releaseAgent(t)
			path := filepath.Join(t.TempDir(), "bad.json")
			g.Expect(os.WriteFile(path, []byte(tc.doc), 0o600)).To(Succeed())
			res := netctl(t, nil, "", args(creds(f), "ipam", "release", "-from-report", path)...)
			g.Expect(res.code).To(Equal(exitError))
			g.Expect(res.stdout).To(BeEmpty())
			g.Expect(res.stderr).To(HavePrefix("contiv-netctl: ipam release: " + path + ": invalid report: "))
			g.Expect(res.stderr).To(ContainSubstring(tc.msg))
			g.Expect(res.stderr).To(HaveSuffix("; nothing released\n"))
			g.Expect(f.received()).To(BeEmpty(), "nothing sent")
		})
	}
}

func TestReleaseOfAMissingFile(t *testing.T) {
	g := NewWithT(t)
	f, _ := releaseAgent(t)
	path := filepath.Join(t.TempDir(), "none.json")
	res := netctl(t, nil, "", args(creds(f), "ipam", "release", "-from-report", path)...)
	g.Expect(res.code).To(Equal(exitError))
	g.Expect(res.stderr).To(Equal("contiv-netctl: ipam release: open " + path + ": no such file or directory\n"))
	g.Expect(f.received()).To(BeEmpty())
}

// The path and the reply shape contiv-netctl copies are the agent's.
func TestTheAgentsReleaseCall(t *testing.T) {
	g := NewWithT(t)
	g.Expect(releasePath).To(Equal(ipam.OperatorReleasePath))
	reply := ipam.OperatorRelease{IP: "10.1.1.5", Owner: "o", Pod: "a/b", IPs: []string{"10.1.1.5", "fd00::5"}, Released: true}
	a, err := json.Marshal(reply)
	g.Expect(err).NotTo(HaveOccurred())
	b, err := json.Marshal(releaseReply(reply))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).To(Equal(string(a)))
	g.Expect(maxPodName).To(Equal(63 + 1 + 253))
}

// A report that names the pod's UID releases an address only while that
// instance of the pod holds it: a pod re-created under the name (another
// UID) keeps its address.
func TestReleaseFromReportMatchesTheUID(t *testing.T) {
	g := NewWithT(t)
	f, h := releaseAgent(t,
		fakeAlloc{"default/web-0", "uid-new", []string{"10.1.1.5"}},
		fakeAlloc{"default/db-0", "uid-db", []string{"10.1.1.6"}})
	file := writeReportFile(t, `[
		{"pod": "default/web-0", "uid": "uid-old", "ips": ["10.1.1.5"]},
		{"pod": "default/db-0", "uid": "uid-db", "ips": ["10.1.1.6"]}]`)
	res := netctl(t, nil, "", args(creds(f), "ipam", "release", "-from-report", file)...)
	g.Expect(res.code).To(Equal(exitOK), res.stderr)
	g.Expect(res.stdout).To(ContainSubstring("skipped 10.1.1.5 (pod default/web-0): moved"))
	g.Expect(res.stdout).To(ContainSubstring("released 10.1.1.6 (pod default/db-0)"))
	g.Expect(posts(f)).To(Equal([]string{`{"ip":"10.1.1.5","pod":"default/web-0","uid":"uid-old"}`,
		`{"ip":"10.1.1.6","pod":"default/db-0","uid":"uid-db"}`}))
	g.Expect(h.held()).To(Equal([]fakeAlloc{{"default/web-0", "uid-new", []string{"10.1.1.5"}}}))
}
