package main

import (
	"encoding/json"
	"net/http"
	"net/netip"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/ipam"
)

// The release candidates, as a table, from the agent's reply; nothing is
// released.
func TestCheckListsTheReleaseCandidates(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
	}{
		{"two", `{"running": true, "gracePeriod": "10m0s", "candidates": [
			{"pod": "default/web-0", "ips": ["10.1.1.5"], "missingSince": "2026-11-28T12:00:00Z", "releaseAt": "2026-11-28T12:10:00Z"},
			{"pod": "prod/db-1", "ips": ["10.1.1.7", "fd00:10:1:1::7"], "missingSince": "2026-11-28T12:01:00Z", "releaseAt": "2026-11-28T12:11:00Z"}]}`,
			"2 release candidate(s); grace period 10m0s, running\n" +
				"POD            IPS                      MISSING-SINCE         RELEASE-AT\n" +
				"default/web-0  10.1.1.5                 2026-11-28T12:00:00Z  2026-11-28T12:10:00Z\n" +
				"prod/db-1      10.1.1.7,fd00:10:1:1::7  2026-11-28T12:01:00Z  2026-11-28T12:11:00Z\n"},
		{"none, paused", `{"running": false, "gracePeriod": "10m0s", "candidates": []}`,
			"no release candidates: every pod holding an address is in the Kubernetes state (grace period 10m0s, paused (the Kubernetes state comes from the agent's local mirror))\n"},
		{"paused, with why", `{"running": false, "blocked": "no contiv-ksr mirror marker", "gracePeriod": "10m0s", "candidates": [
			{"pod": "default/web-0", "uid": "u1", "ips": ["10.1.1.5"], "missingSince": "2026-11-28T12:00:00Z", "releaseAt": "2026-11-28T12:10:00Z"}]}`,
			"1 release candidate(s); grace period 10m0s, paused: no contiv-ksr mirror marker\n" +
				"POD            IPS       MISSING-SINCE         RELEASE-AT\n" +
				"default/web-0  10.1.1.5  2026-11-28T12:00:00Z  2026-11-28T12:10:00Z\n"},
		{"a sandbox lives", `{"running": true, "gracePeriod": "10m0s", "candidates": [
			{"pod": "default/web-0", "ips": ["10.1.1.5"], "missingSince": "2026-11-28T12:00:00Z", "releaseAt": "2026-11-28T12:10:00Z", "sandboxLives": true}]}`,
			"1 release candidate(s); grace period 10m0s, running\n" +
				"POD            IPS       MISSING-SINCE         RELEASE-AT\n" +
				"default/web-0  10.1.1.5  2026-11-28T12:00:00Z  2026-11-28T12:10:00Z (kept: the container runtime lists its sandbox)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			f := newFakeAgent(t)
			f.reply(http.MethodGet, candidatesPath, http.StatusOK, tc.body)
			res := netctl(t, map[string]string{envServer: f.URL}, "", "ipam", "check")
			g.Expect(res.code).To(Equal(exitOK), res.stderr)
			g.Expect(res.stdout).To(Equal(tc.want))
			reqs := f.received()
			g.Expect(reqs).To(HaveLen(1), "one GET, nothing released")
			g.Expect(reqs[0].method).To(Equal(http.MethodGet))
			g.Expect(reqs[0].path).To(Equal(candidatesPath))
		})
	}
}

func TestCheckFailures(t *testing.T) {
	g := NewWithT(t)
	f := newFakeAgent(t)
	f.reply(http.MethodGet, candidatesPath, http.StatusOK, "<html>")
	res := netctl(t, map[string]string{envServer: f.URL}, "", "ipam", "check")
	g.Expect(res.code).To(Equal(exitError))
	g.Expect(res.stderr).To(ContainSubstring(`ipam check: the agent's reply "<html>"`))

	res = netctl(t, map[string]string{envServer: f.URL}, "", "ipam", "check", "now")
	g.Expect(res.code).To(Equal(exitUsage))
	g.Expect(res.stderr).To(ContainSubstring(`ipam check: unexpected argument "now"`))
}

// sampleNode is GET /contiv/v1/ipam of node worker-1 (the fields
// contiv-netctl reads, and one it does not).
const sampleNode = `{"nodeId": 3, "nodeName": "worker-1", "podSubnetThisNode": "10.1.1.0/24"}`

// sampleCandidates is GET /contiv/v1/ipam/release-candidates: two pods,
// one dual-stack.
const sampleCandidates = `{"running": true, "gracePeriod": "10m0s", "candidates": [
	{"pod": "default/web-0", "ips": ["10.1.1.5", "fd00:10:1:1::5"], "missingSince": "2026-11-28T12:00:00Z", "releaseAt": "2026-11-28T12:10:00Z"},
	{"pod": "prod/db-1", "uid": "6c1b0e2a-0000-4f57-9a1e-2f9c5b7d3e10", "ips": ["10.1.1.7"], "missingSince": "2026-11-28T12:01:00Z", "releaseAt": "2026-11-28T12:11:00Z"}]}`

// -o json writes the report: the agent's candidates, the node it serves,
// the server and when; it decodes as ipam release reads it. Nothing is
// released.
func TestCheckWritesAReport(t *testing.T) {
	for _, flags := range [][]string{{"-o", "json"}, {"--o=json"}} {
		g := NewWithT(t)
		f := newFakeAgent(t)
		f.reply(http.MethodGet, ipamPath, http.StatusOK, sampleNode)
		f.reply(http.MethodGet, candidatesPath, http.StatusOK, sampleCandidates)
		before := time.Now().UTC().Truncate(time.Second)
		res := netctl(t, map[string]string{envServer: f.URL}, "", args([]string{"ipam", "check"}, flags...)...)
		after := time.Now().UTC()
		g.Expect(res.code).To(Equal(exitOK), res.stderr)
		g.Expect(res.stderr).To(BeEmpty())

		var rep report
		g.Expect(json.Unmarshal([]byte(res.stdout), &rep)).To(Succeed(), res.stdout)
		taken, err := time.Parse(time.RFC3339, rep.TakenAt)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(taken).To(BeTemporally(">=", before))
		g.Expect(taken).To(BeTemporally("<=", after))
		g.Expect(res.stdout).To(MatchJSON(`{"version": "contiv-netctl/release-report/1", "server": "` + f.URL + `",
			"node": "worker-1", "nodeId": 3, "takenAt": "` + rep.TakenAt + `", "running": true, "gracePeriod": "10m0s",
			"candidates": [
			{"pod": "default/web-0", "ips": ["10.1.1.5", "fd00:10:1:1::5"], "missingSince": "2026-11-28T12:00:00Z", "releaseAt": "2026-11-28T12:10:00Z"},
			{"pod": "prod/db-1", "uid": "6c1b0e2a-0000-4f57-9a1e-2f9c5b7d3e10", "ips": ["10.1.1.7"], "missingSince": "2026-11-28T12:01:00Z", "releaseAt": "2026-11-28T12:11:00Z"}]}`))

		checked, err := decodeReport([]byte(res.stdout))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(checked).To(Equal(&checkedReport{node: "worker-1", takenAt: rep.TakenAt, pods: []reportPod{
			{pod: "default/web-0", addrs: []netip.Addr{netip.MustParseAddr("10.1.1.5"), netip.MustParseAddr("fd00:10:1:1::5")}},
			{pod: "prod/db-1", uid: "6c1b0e2a-0000-4f57-9a1e-2f9c5b7d3e10", addrs: []netip.Addr{netip.MustParseAddr("10.1.1.7")}}}}))

		reqs := f.received()
		g.Expect(reqs).To(HaveLen(2), "two GETs, nothing released")
		g.Expect([]string{reqs[0].method + " " + reqs[0].path, reqs[1].method + " " + reqs[1].path}).To(
			Equal([]string{"GET " + ipamPath, "GET " + candidatesPath}))
	}
}

// A report without candidates says so with an empty list, not null.
func TestCheckWritesAnEmptyReport(t *testing.T) {
	g := NewWithT(t)
	f := newFakeAgent(t)
	f.reply(http.MethodGet, ipamPath, http.StatusOK, sampleNode)
	f.reply(http.MethodGet, candidatesPath, http.StatusOK, `{"running": false, "gracePeriod": "10m0s", "candidates": null}`)
	res := netctl(t, map[string]string{envServer: f.URL}, "", "ipam", "check", "-o", "json")
	g.Expect(res.code).To(Equal(exitOK), res.stderr)
	var rep map[string]any
	g.Expect(json.Unmarshal([]byte(res.stdout), &rep)).To(Succeed())
	g.Expect(rep).To(HaveKeyWithValue("candidates", BeEmpty()))
	g.Expect(rep["candidates"]).NotTo(BeNil())
	g.Expect(rep).To(HaveKeyWithValue("running", false))
}

// Without the node the agent serves there is no report.
func TestCheckReportFailures(t *testing.T) {
	for _, tc := range []struct {
		name, node, msg string
		status          int
	}{
		{"not ready", `{"error": "IPAM is not initialised yet: no resync processed"}`,
			ipamPath + ": 503 Service Unavailable: IPAM is not initialised yet", http.StatusServiceUnavailable},
		{"no node name", `{"nodeId": 3}`, `ipam check: the agent's reply "{\"nodeId\": 3}" names no node`, http.StatusOK},
		{"not JSON", `<html>`, `ipam check: the agent's reply "<html>"`, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			f := newFakeAgent(t)
			f.reply(http.MethodGet, ipamPath, tc.status, tc.node)
			f.reply(http.MethodGet, candidatesPath, http.StatusOK, sampleCandidates)
			res := netctl(t, map[string]string{envServer: f.URL}, "", "ipam", "check", "-o", "json")
			g.Expect(res.code).To(Equal(exitError))
			g.Expect(res.stdout).To(BeEmpty(), "no partial report")
			g.Expect(res.stderr).To(ContainSubstring(tc.msg))
		})
	}
}

// The paths and the reply shapes contiv-netctl copies are the agent's.
func TestTheAgentsCandidatesCall(t *testing.T) {
	g := NewWithT(t)
	g.Expect(candidatesPath).To(Equal(ipam.CandidatesPath))
	g.Expect(ipamPath).To(Equal(ipam.IPAMPath))
	info, err := json.Marshal(ipam.NodeIPAMInfo{NodeID: 7, NodeName: "worker-7"})
	g.Expect(err).NotTo(HaveOccurred())
	var node nodeInfo
	g.Expect(json.Unmarshal(info, &node)).To(Succeed())
	g.Expect(node).To(Equal(nodeInfo{NodeID: 7, NodeName: "worker-7"}))
	in := ipam.ReleaseCandidates{Running: true, GracePeriod: "1m0s", Candidates: []ipam.ReleaseCandidate{
		{Pod: "a/b", IPs: []string{"10.1.1.2"}, MissingSince: "s", ReleaseAt: "r"}}}
	b, err := json.Marshal(in)
	g.Expect(err).NotTo(HaveOccurred())
	var out candidateList
	g.Expect(json.Unmarshal(b, &out)).To(Succeed())
	g.Expect(out).To(Equal(candidateList{Running: true, GracePeriod: "1m0s",
		Candidates: []candidate{{Pod: "a/b", IPs: []string{"10.1.1.2"}, MissingSince: "s", ReleaseAt: "r"}}}))
}
