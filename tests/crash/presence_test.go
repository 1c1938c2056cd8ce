package crash

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/tests/testenv"
)

// presenceTTL is the presence TTL of TestRestartAfterSIGKILLIsNotHeldByThePresenceTTL:
// twice the default, so that a restart that waits for its predecessor's
// lease cannot pass for a fast one.
const presenceTTL = 30 * time.Second

// TestRestartAfterSIGKILLIsNotHeldByThePresenceTTL SIGKILLs the agent
// (presence TTL 30s, its lease still alive in etcd) and starts it again
// on the same directory, twice: each time /readiness is 200 within half
// the TTL, because the restarted agent (same bolt file, so the same
// instance) takes over its predecessor's presence key at once and logs
// it, naming the killed process's value; it keeps node ID 1.
func TestRestartAfterSIGKILLIsNotHeldByThePresenceTTL(t *testing.T) {
	g := NewWithT(t)
	a := testenv.StartAgent(t, testenv.Options{Node: "crash-presence",
		Env: []string{"NODESYNC_PRESENCE_TTL=" + presenceTTL.String()}})
	first := presenceLines(t, a, "presence claimed")
	g.Expect(first).To(HaveLen(1), "the first run claims its presence once")
	g.Expect(first[0]["ttl"]).To(BeEquivalentTo(presenceTTL.Nanoseconds()), "the TTL in force")
	previous := first[0]["holder"]
	g.Expect(previous).To(ContainSubstring(`"instance":`), "the presence value carries the bolt file's instance")

	for run := 1; run <= 2; run++ {
		took := restart(t, a)
		t.Logf("restart %d: SIGKILL to /readiness 200 took %v (presence TTL %v)", run, took.Round(time.Millisecond), presenceTTL)
		// A restart that waits for the killed agent's lease takes at least
		// two thirds of the TTL (keep-alives come every third), a whole
		// TTL with the embedded etcd, which renews leases when it starts.
		g.Expect(took).To(BeNumerically("<", presenceTTL/2), "restart %d waited for the killed agent's lease", run)

		over := presenceLines(t, a, "presence taken over")
		g.Expect(over).To(HaveLen(run), "restart %d takes over its predecessor's presence", run)
		g.Expect(over[run-1]["previous"]).To(Equal(previous), "restart %d names the killed run's value", run)
		g.Expect(over[run-1]["level"]).To(Equal("INFO"))
		claimed := presenceLines(t, a, "presence claimed")
		g.Expect(claimed).To(HaveLen(run + 1))
		now := claimed[run]["holder"]
		g.Expect(now).NotTo(Equal(previous), "each run has its own value")
		g.Expect(instanceOf(t, now)).To(Equal(instanceOf(t, previous)), "one bolt file, one instance")
		previous = now

		code, body := a.Get(t, "/contiv/v1/ipam")
		g.Expect(code).To(Equal(http.StatusOK))
		g.Expect(string(body)).To(ContainSubstring(`"nodeId": 1`), "restart %d keeps the node ID", run)
	}
	g.Expect(presenceLines(t, a, "another agent holds this node name")).To(BeEmpty(), "no run waited")
	expectCleanLog(t, a)
}

// presenceLines returns the agent's nodesync log records (every run so
// far, in order) whose message starts with msg.
func presenceLines(t *testing.T, a *testenv.Agent, msg string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(a.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range strings.Split(string(data), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		if m, _ := rec["msg"].(string); strings.HasPrefix(m, msg) {
			out = append(out, rec)
		}
	}
	return out
}

// instanceOf returns the instance of a presence value ("" if none).
func instanceOf(t *testing.T, value any) string {
	t.Helper()
	s, _ := value.(string)
	var h struct {
		Instance string `json:"instance"`
	}
	if err := json.Unmarshal([]byte(s), &h); err != nil {
		t.Fatalf("presence value %q: %v", s, err)
	}
	return h.Instance
}
