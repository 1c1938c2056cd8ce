package main

import (
	"encoding/json"
	"net/http"
	"testing"

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

// The path and the reply shape contiv-netctl copies are the agent's.
func TestTheAgentsCandidatesCall(t *testing.T) {
	g := NewWithT(t)
	g.Expect(candidatesPath).To(Equal(ipam.CandidatesPath))
	in := ipam.ReleaseCandidates{Running: true, GracePeriod: "1m0s", Candidates: []ipam.ReleaseCandidate{
		{Pod: "a/b", IPs: []string{"10.1.1.2"}, MissingSince: "s", ReleaseAt: "r"}}}
	b, err := json.Marshal(in)
	g.Expect(err).NotTo(HaveOccurred())
	var out candidateList
	g.Expect(json.Unmarshal(b, &out)).To(Succeed())
	g.Expect(out).To(Equal(candidateList{Running: true, GracePeriod: "1m0s",
		Candidates: []candidate{{Pod: "a/b", IPs: []string{"10.1.1.2"}, MissingSince: "s", ReleaseAt: "r"}}}))
}
