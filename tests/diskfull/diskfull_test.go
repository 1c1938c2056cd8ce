//go:build linux

package diskfull

import (
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/podmanager"
	"github.com/contiv-ipam/agent/plugins/podmanager/cni"
	"github.com/contiv-ipam/agent/tests/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const (
	numClients = 16
	// tmpfsSize is the file system of the bolt file: room for the
	// database and the ballast.
	tmpfsSize = 8 << 20
	// room is what the ballast leaves free: some 120 to 150 ADDs of
	// 16 clients before one fails.
	room = 64 << 10
	// fillTimeout bounds the ADDs until every client has seen one fail.
	fillTimeout = 30 * time.Second
	// readyTimeout bounds the wait for /readiness to change: the agent
	// probes the store every 2 s.
	readyTimeout = 10 * time.Second
	// probeInterval is how often the agent writes its store probe while
	// the store's writes fail (ipam's probeInterval).
	probeInterval = 2 * time.Second
	// maxFullRounds bounds the rounds of ADDs until one fails entirely.
	maxFullRounds = 50
	// readdRounds are the rounds of ADDs once the ballast is gone.
	readdRounds = 2
	// storeFailing is what IPAM reports while the store does not take
	// its writes (ipam.ErrStoreFailing).
	storeFailing = "the pod allocations cannot be stored"
)

// diskfullIPAMConf keeps pods absent from Kubernetes far beyond the test
// (the pods exist only in the clients' calls).
const diskfullIPAMConf = "absentPodGracePeriod: 1h\nstoreTimeout: 10s\n"

// TestDiskFull runs the agent with its bolt file on a small tmpfs, fills
// the tmpfs with a ballast, and adds pods from 16 clients until ADDs
// fail; then checks that readiness is 503 with IPAM's reason, that no
// failed ADD holds an address and every acknowledged one does; removes
// the ballast and checks that the agent is ready again by itself, that
// ADDs succeed, and that a restart keeps every acknowledged ADD and no
// failed one.
func TestDiskFull(t *testing.T) {
	g := NewWithT(t)
	fs := MountTmpfs(t, tmpfsSize)
	a := testenv.StartAgent(t, testenv.Options{Node: "diskfull", Conf: map[string]string{
		"bolt.conf":   "db-path: " + filepath.Join(fs.Dir, "bolt.db") + "\n",
		"ipam.conf":   diskfullIPAMConf,
		"contiv.conf": bigSubnetConf(t),
	}})
	ballast := fs.Fill(t, room)
	t.Logf("ballast %d bytes: %d bytes of the %d-byte tmpfs left", ballast, room, fs.Size)
	fig := &figures{}
	defer fig.report(t)

	clients := newClients(t, a)
	start := time.Now()
	fillUntilFailure(t, clients)
	fig.full = time.Since(start)
	acked, failed := outcomes(clients)
	fig.acked = len(acked)
	t.Logf("the disk is full after %s: %d ADDs acknowledged, %d failed (codes %v): %v",
		fig.full.Round(time.Millisecond), len(acked), len(failed), codes(failed), firstErrors(failed, 1))

	// Writes fail: not ready, with IPAM's reason.
	failedAt := expectNotReady(t, a, clients, "once ADDs fail")
	acked, failed = outcomes(clients)
	g.Expect(unanswered(failed)).To(BeEmpty(), "every failed ADD is answered with code 100 (not durable) or 11 (try again)")
	g.Expect(heldViolations(t, a, clients[0].rc, acked, failed)).To(BeEmpty(), "while the disk is full; agent log %s", a.LogPath())

	// The probe is one small write, which bolt can place in pages it
	// freed inside its file: it may make the agent ready again while
	// the disk is full, until the next ADD that needs new pages. Seen,
	// not required.
	if code, _, _ := waitReadiness(t, a, http.StatusOK, time.Until(failedAt.Add(probeInterval+time.Second))); code == http.StatusOK {
		fig.readyWhileFull = time.Since(failedAt)
	}

	// The ballast goes while writes fail: ready again without any ADD.
	expectNotReady(t, a, clients, "before the ballast is removed")
	fs.Drain(t)
	code, body, took := waitReadiness(t, a, http.StatusOK, readyTimeout)
	g.Expect(code).To(Equal(http.StatusOK), "readiness %s after the ballast was removed: %s", readyTimeout, body)
	fig.readyAfterDrain = took

	// Rounds of ADDs like the one that failed last succeed.
	_, failed = outcomes(clients)
	fig.failed = len(failed)
	for range readdRounds {
		fig.after += addRound(clients, "after")
	}
	acked, failed = outcomes(clients)
	g.Expect(failed[fig.failed:]).To(BeEmpty(), "ADDs after the ballast was removed: %v", firstErrors(failed[fig.failed:], 3))
	fig.held = len(acked)

	// A restart keeps every acknowledged ADD, and no failed one.
	a.Kill(t)
	a.Start(t)
	conn, err := dial(a.Socket)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = conn.Close() }()
	g.Expect(heldViolations(t, a, cni.NewRemoteCNIClient(conn), acked, failed)).To(BeEmpty(), "after the restart; agent log %s", a.LogPath())
	g.Expect(a.LogMentions(t, "panic", "fatal")).To(BeEmpty())
}

// unanswered lists the failed ADDs not answered with code 100 (the
// change is not durable) or 11 (try again later).
func unanswered(failed []outcome) []string {
	var out []string
	for _, o := range failed {
		if o.code != cni.CodeInternal && o.code != cni.CodeTryAgainLater {
			out = append(out, o.err.Error())
		}
	}
	return out
}

// expectNotReady runs rounds of one ADD per client until every ADD of a
// round failed (the disk is full: each round's ADDs need new pages), then
// checks at once, before the agent's next store probe, that /readiness
// answers 503 with IPAM's reason. It returns when that round ended.
func expectNotReady(t *testing.T, a *testenv.Agent, clients []*client, when string) time.Time {
	t.Helper()
	for round := 1; ; round++ {
		if addRound(clients, "full") == 0 {
			break
		}
		if round == maxFullRounds {
			t.Fatalf("%s: no round of %d ADDs failed entirely in %d rounds: the disk is not full", when, len(clients), maxFullRounds)
		}
	}
	failedAt := time.Now()
	code, body := a.Get(t, "/readiness")
	if code != http.StatusServiceUnavailable || !strings.Contains(string(body), storeFailing) {
		t.Fatalf("%s: GET /readiness: %d, want 503 with %q: %s", when, code, storeFailing, body)
	}
	return failedAt
}

// addRound makes one ADD of a new key per client, all at once, and
// returns how many were acknowledged.
func addRound(clients []*client, phase string) int {
	var wg sync.WaitGroup
	acks := make([]bool, len(clients))
	for i, c := range clients {
		wg.Go(func() { acks[i] = c.addNew(phase).err == nil })
	}
	wg.Wait()
	n := 0
	for _, ok := range acks {
		if ok {
			n++
		}
	}
	return n
}

// newClients dials one connection per client, closed at cleanup.
func newClients(t *testing.T, a *testenv.Agent) []*client {
	t.Helper()
	clients := make([]*client, numClients)
	for i := range clients {
		conn, err := dial(a.Socket)
		if err != nil {
			t.Fatalf("dial %s: %v", a.Socket, err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		clients[i] = &client{id: i, rc: cni.NewRemoteCNIClient(conn)}
	}
	return clients
}

// fillUntilFailure runs the clients, each adding new keys until one of
// its ADDs fails; the test fails when that takes longer than
// fillTimeout.
func fillUntilFailure(t *testing.T, clients []*client) {
	t.Helper()
	deadline := time.Now().Add(fillTimeout)
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				if c.addNew("fill").err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	for _, c := range clients {
		if len(c.fail) == 0 {
			acked, _ := outcomes(clients)
			t.Fatalf("client %d saw no ADD fail within %s (%d ADDs acknowledged in all): the disk did not fill", c.id, fillTimeout, len(acked))
		}
	}
}

// heldViolations compares what the agent holds with what the clients were
// told: every acknowledged ADD holds its address (allocations, and a CHECK
// with it as prevResult passes), every failed one holds nothing
// (allocations lack it, and CHECK says so), no address is held twice.
func heldViolations(t *testing.T, a *testenv.Agent, rc cni.RemoteCNIClient, acked, failed []outcome) []string {
	t.Helper()
	held := map[podmanager.AttachmentKey]netip.Addr{}
	owner := map[netip.Addr]podmanager.AttachmentKey{}
	var v []string
	for _, al := range a.Allocations(t) {
		if al.Network != network {
			continue
		}
		k := podmanager.AttachmentKey{Network: al.Network, ContainerID: al.ContainerID, IfName: al.IfName}
		ip, err := netip.ParseAddr(al.Addr())
		if err != nil {
			t.Fatalf("GET allocations: %+v: %v", al, err)
		}
		if other, dup := owner[ip]; dup {
			v = append(v, fmt.Sprintf("%s is held by %s and %s", ip, other, k))
		}
		held[k], owner[ip] = ip, k
	}
	for _, o := range acked {
		switch got, ok := held[o.key]; {
		case !ok:
			v = append(v, fmt.Sprintf("acknowledged ADD %s (%s) is not held", o.key, o.addr))
		case got != o.addr:
			v = append(v, fmt.Sprintf("acknowledged ADD %s got %s, holds %s", o.key, o.addr, got))
		}
		if err := check(rc, o.key, o.addr); err != nil {
			v = append(v, fmt.Sprintf("acknowledged ADD %s (%s): %v", o.key, o.addr, err))
		}
	}
	for _, o := range failed {
		if ip, ok := held[o.key]; ok {
			v = append(v, fmt.Sprintf("failed ADD %s (%v) holds %s", o.key, o.err, ip))
		}
		if err := check(rc, o.key, netip.Addr{}); err == nil || !strings.Contains(err.Error(), errNoAllocation.Error()) {
			v = append(v, fmt.Sprintf("failed ADD %s (%v): CHECK without prevResult: %v, want %v", o.key, o.err, err, errNoAllocation))
		}
	}
	return v
}

// waitReadiness polls /readiness until it answers want, for at most
// timeout; it returns the last answer and the time it took.
func waitReadiness(t *testing.T, a *testenv.Agent, want int, timeout time.Duration) (int, string, time.Duration) {
	t.Helper()
	start := time.Now()
	for {
		code, body := a.Get(t, "/readiness")
		if took := time.Since(start); code == want || took > timeout {
			return code, string(body), took
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// outcomes gathers the clients' acknowledged and failed ADDs.
func outcomes(clients []*client) (acked, failed []outcome) {
	for _, c := range clients {
		acked = append(acked, c.acks...)
		failed = append(failed, c.fail...)
	}
	return acked, failed
}

// codes counts the failed ADDs by error code.
func codes(failed []outcome) map[uint32]int {
	out := map[uint32]int{}
	for _, o := range failed {
		out[o.code]++
	}
	return out
}

// firstErrors are the errors of the first n outcomes.
func firstErrors(outs []outcome, n int) []string {
	var out []string
	for _, o := range outs[:min(n, len(outs))] {
		out = append(out, o.err.Error())
	}
	return out
}

// bigSubnetConf is conf/contiv.conf with a /20 pod subnet per node (4094
// addresses): the disk fills long before the pool does.
func bigSubnetConf(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "conf", "contiv.conf"))
	if err != nil {
		t.Fatal(err)
	}
	const old = "  podSubnetOneNodePrefixLen: 24"
	conf := string(data)
	if !strings.Contains(conf, old+"\n") {
		t.Fatalf("conf/contiv.conf no longer says %q; update bigSubnetConf", strings.TrimSpace(old))
	}
	return strings.Replace(conf, old, "  podSubnetOneNodePrefixLen: 20", 1)
}

// figures are what the test reports.
type figures struct {
	acked  int           // before the disk was full
	failed int           // while it was
	after  int           // acknowledged once the ballast was removed
	held   int           // every acknowledged ADD, checked after the restart
	full   time.Duration // from the first ADD to the last client's failure
	// readyWhileFull: the store probe made the agent ready that long
	// after a round of failed ADDs, the ballast still there (0: not
	// within a probe interval and a second).
	readyWhileFull  time.Duration
	readyAfterDrain time.Duration // from the ballast's removal to ready
}

func (f *figures) report(t *testing.T) {
	t.Logf("figures: adds_acked_before_full=%d full_after=%s adds_failed=%d ready_while_full_after=%s ready_after_ballast_removed=%s adds_acked_after=%d held_after_restart=%d",
		f.acked, f.full.Round(time.Millisecond), f.failed, f.readyWhileFull.Round(time.Millisecond),
		f.readyAfterDrain.Round(time.Millisecond), f.after, f.held)
}
