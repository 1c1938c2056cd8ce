package crash

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/contiv-ipam/agent/infra/kvdb/bolt"
	"github.com/contiv-ipam/agent/plugins/podmanager"
	"github.com/contiv-ipam/agent/plugins/podmanager/cni"
	"github.com/contiv-ipam/agent/tests/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const (
	numClients = 16
	// reAdds is how many held keys are added again after each restart.
	reAdds = 4
	// firstAckTimeout bounds the wait for the first acknowledged call of
	// a cycle (the agent is ready, so it comes in milliseconds).
	firstAckTimeout = 30 * time.Second
)

// crashIPAMConf keeps the grace period of pods absent from Kubernetes far
// beyond the test: the pods of the test exist nowhere but in the clients'
// CNI calls, and their release by reconciliation is not what is tested.
const crashIPAMConf = "absentPodGracePeriod: 1h\nstoreTimeout: 10s\n"

// TestCrash runs 16 concurrent CNI clients over the agent's gRPC socket,
// SIGKILLs the agent at a random moment with calls in flight, restarts it
// on the same directory, and checks after every restart that no address
// is held twice, every acknowledged Add is still held with its address
// (unless an acknowledged Delete followed), every acknowledged Delete
// holds nothing (also those a GC released), and a repeated Add of a held
// key returns its address.
// CRASH_CYCLES sets the number of cycles (default 5), CRASH_SEED the seed.
func TestCrash(t *testing.T) {
	fig := crash(t, testenv.Options{Conf: map[string]string{"ipam.conf": crashIPAMConf}}, callTimeout)
	fig.report(t, "crash")
}

// stalledIPAMConf gives a write 200 ms: the stalls of
// TestCrashWithStalledCommits outlast it.
const stalledIPAMConf = "absentPodGracePeriod: 1h\nstoreTimeout: 200ms\n"

// stallSpec stalls 2% of bolt's commits for 500 to 900 ms (bolt.StallEnv):
// longer than storeTimeout and the clients' deadline, so every call in a
// stalled commit gives up before its write lands.
const stallSpec = "0.02,500ms,900ms"

// stalledCallTimeout is the clients' deadline under stalls: a call whose
// commit stalls past it gives up while the commit holds its write.
const stalledCallTimeout = 400 * time.Millisecond

// TestCrashWithStalledCommits is TestCrash on a disk that stalls: bolt's
// committer (built with the faults tag) sleeps before some commits for
// longer than ipam.conf storeTimeout and the clients' deadline. The
// writes queued behind a stalled commit are withdrawn when storeTimeout
// or the call ends (not applied: the ADD is undone); those it has taken
// keep the commit's outcome, which the IPAM waits for however long it
// takes. The caller gives up first, and the write lands after its
// caller left (a late apply): the address stays held for the key (the
// client settles it with a DEL or a GC), never freed on a guess and
// given to another. The same checks hold; the test also requires that
// commits stalled and writes were withdrawn, or it tested nothing. Late
// applies that survive to the check (their key not deleted later in the
// cycle) are counted and logged, not required: a run with few stalls may
// have none (bolt's TestStalledCommitLandsLateAndWithdrawsTheQueue and
// ipam's exactness tests pin the late apply deterministically).
func TestCrashWithStalledCommits(t *testing.T) {
	fig := crash(t, testenv.Options{Conf: map[string]string{"ipam.conf": stalledIPAMConf},
		Env: []string{bolt.StallEnv + "=" + stallSpec}}, stalledCallTimeout)
	fig.report(t, "crash-stalled")
	stalls := len(fig.agent.LogMentions(t, "fault injection: commit stalled"))
	t.Logf("crash-stalled: stalls=%d store_not_applied=%d store_unknown=%d late_applied=%d",
		stalls, fig.notApplied, fig.unknown, fig.lateApplied)
	g := NewWithT(t)
	g.Expect(stalls).To(BeNumerically(">", 0), "no commit was stalled: is %s honoured?", bolt.StallEnv)
	g.Expect(fig.notApplied).To(BeNumerically(">", 0), "no write withdrawn behind a stalled commit")
}

// crash runs the cycles of TestCrash on an agent started with opts.
func crash(t *testing.T, opts testenv.Options, timeout time.Duration) *figures {
	g := NewWithT(t)
	cycles := envInt(t, "CRASH_CYCLES", 5)
	seed := uint64(envInt(t, "CRASH_SEED", int(time.Now().UnixNano()&0x7fffffff)))
	t.Logf("CRASH_SEED=%d CRASH_CYCLES=%d", seed, cycles)
	rng := rand.New(rand.NewPCG(seed, 0))

	a := testenv.StartAgent(t, opts)
	clients := make([]*client, numClients)
	for i := range clients {
		clients[i] = newClient(i, seed, timeout)
	}
	fig := &figures{seed: seed, agent: a, clients: clients}
	for cycle := 1; cycle <= cycles; cycle++ {
		runFor := 200*time.Millisecond + time.Duration(rng.Int64N(int64(1300*time.Millisecond)))
		fig.restarts = append(fig.restarts, runCycle(t, a, clients, runFor, fig))
		fig.cycles = cycle

		held := allocations(t, a)
		fig.lateApplied += lateApplied(clients, held)
		v := Check(ledgers(clients), network, held)
		v = append(v, resolve(t, a, clients, cycle, rng)...)
		v = append(v, Check(ledgers(clients), network, allocations(t, a))...)
		for _, line := range a.LogMentions(t, "panic", "fatal") {
			v = append(v, "agent log: "+line)
		}
		fig.violations += len(v)
		if len(v) > 0 {
			fig.report(t, "crash")
		}
		g.Expect(v).To(BeEmpty(), "cycle %d (run %s before the kill): violations; agent log %s", cycle, runFor, a.LogPath())
	}
	fig.held = len(allocations(t, a))
	return fig
}

// runCycle runs the clients for d once the first call is acknowledged,
// SIGKILLs the agent, waits for every client to stop and starts the agent
// again; it returns the time from the kill to ready.
func runCycle(t *testing.T, a *testenv.Agent, clients []*client, d time.Duration, fig *figures) time.Duration {
	t.Helper()
	conns := make([]*grpc.ClientConn, len(clients))
	for i := range conns {
		conn, err := dial(a.Socket)
		if err != nil {
			t.Fatalf("dial %s: %v", a.Socket, err)
		}
		conns[i] = conn
	}
	stop, first, allDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	for i, c := range clients {
		c.firstErr = nil
		rc := cni.NewRemoteCNIClient(conns[i])
		wg.Go(func() { c.run(rc, stop, func() { once.Do(func() { close(first) }) }) })
	}
	go func() { wg.Wait(); close(allDone) }()

	var early string
	select {
	case <-first:
		<-time.After(d) // the random moment of the kill, not a synchronisation
	case <-allDone:
		early = "every client stopped before any call was acknowledged"
	case <-time.After(firstAckTimeout):
		early = fmt.Sprintf("no call acknowledged within %s", firstAckTimeout)
	}
	fig.scrape(t)
	killed := time.Now()
	a.Kill(t)
	close(stop)
	<-allDone
	for _, conn := range conns {
		_ = conn.Close()
	}
	if early != "" {
		t.Fatalf("%s; first errors: %v; agent log %s", early, firstErrors(clients), a.LogPath())
	}
	a.Start(t)
	return time.Since(killed)
}

// resolve settles every key of unknown outcome, with one GC that lists
// the held keys (even cycles) or with a Delete per key (odd cycles), and
// adds a few held keys again (a repeated ADD must return the same
// address); it returns the violations it saw. Runs on the test goroutine
// while the clients are stopped.
func resolve(t *testing.T, a *testenv.Agent, clients []*client, cycle int, rng *rand.Rand) []string {
	t.Helper()
	conn, err := dial(a.Socket)
	if err != nil {
		t.Fatalf("dial %s: %v", a.Socket, err)
	}
	defer func() { _ = conn.Close() }()
	rc := cni.NewRemoteCNIClient(conn)
	var v []string
	if cycle%2 == 0 {
		v = collect(rc, clients)
	} else {
		for _, c := range clients {
			for _, k := range c.ledger.Unknown() {
				if err := retry(func() error { return c.remove(rc, k) }); err != nil {
					v = append(v, fmt.Sprintf("after the restart (agent ready): %v", err))
				}
			}
		}
	}
	return append(v, reAdd(rc, clients, rng)...)
}

// retry calls call until it succeeds or fails otherwise than "try again
// later" (code 11) or a deadline, as a runtime retries a CNI call; at
// most 50 times. Only TestCrashWithStalledCommits sees such failures
// once the agent is ready: a call behind a stalled commit.
func retry(call func() error) error {
	var err error
	for range 50 {
		if err = call(); err == nil || !(strings.Contains(err.Error(), "code 11:") || status.Code(err) == codes.DeadlineExceeded) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

// collect calls GC on the network with the held keys as the valid
// attachments: every key of unknown outcome is released.
func collect(rc cni.RemoteCNIClient, clients []*client) []string {
	req := &cni.GCRequest{Version: "1.1.0", NetworkName: network}
	for _, c := range clients {
		for _, k := range c.ledger.Held() {
			req.ValidAttachments = append(req.ValidAttachments, &cni.Attachment{ContainerId: k.ContainerID, InterfaceName: k.IfName})
		}
	}
	err := retry(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		reply, err := rc.GC(ctx, req)
		if err == nil {
			err = replyError(reply)
		}
		return err
	})
	if err != nil {
		return []string{fmt.Sprintf("GC after the restart (agent ready): %v", err)}
	}
	for _, c := range clients {
		for _, k := range c.ledger.Unknown() {
			c.ledger.CollectedOK(k)
		}
	}
	return nil
}

// reAdd checks up to reAdds random held keys (CHECK with the held
// address as prevResult must pass) and adds them again: each must get the
// address it holds.
func reAdd(rc cni.RemoteCNIClient, clients []*client, rng *rand.Rand) []string {
	type heldKey struct {
		c *client
		k podmanager.AttachmentKey
	}
	var held []heldKey
	for _, c := range clients {
		for _, k := range c.ledger.Held() {
			held = append(held, heldKey{c, k})
		}
	}
	rng.Shuffle(len(held), func(i, j int) { held[i], held[j] = held[j], held[i] })
	var v []string
	for _, h := range held[:min(reAdds, len(held))] {
		want, _ := h.c.ledger.Addr(h.k)
		pod := h.c.ledger.Pod(h.k)
		if err := retry(func() error { return check(rc, h.k, podArgs(pod), want) }); err != nil {
			v = append(v, fmt.Sprintf("CHECK after the restart: %v", err))
		}
		var got netip.Addr
		err := retry(func() (err error) { got, err = h.c.add(rc, h.k, podArgs(pod), pod); return err })
		switch {
		case err != nil:
			v = append(v, fmt.Sprintf("repeated ADD after the restart: %v", err))
		case got != want:
			v = append(v, fmt.Sprintf("repeated ADD of %s: got %s, held %s", h.k, got, want))
		}
	}
	return v
}

// allocations reads the agent's allocations over REST.
func allocations(t *testing.T, a *testenv.Agent) []Allocation {
	t.Helper()
	rest := a.Allocations(t)
	out := make([]Allocation, 0, len(rest))
	for _, p := range rest {
		ip, err := parseIP(p.MainIP)
		if err != nil {
			t.Fatalf("GET allocations: entry %+v: %v", p, err)
		}
		out = append(out, Allocation{
			Key:  podmanager.AttachmentKey{Network: p.Network, ContainerID: p.ContainerID, IfName: p.IfName},
			Pod:  p.PodID.Namespace + "/" + p.PodID.Name,
			Addr: ip,
		})
	}
	return out
}

// parseIP accepts an address with or without a prefix length.
func parseIP(s string) (netip.Addr, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		return p.Addr(), err
	}
	return netip.ParseAddr(s)
}

func ledgers(clients []*client) []*Ledger {
	out := make([]*Ledger, len(clients))
	for i, c := range clients {
		out[i] = c.ledger
	}
	return out
}

func firstErrors(clients []*client) []string {
	var out []string
	for _, c := range clients {
		if c.firstErr != nil {
			out = append(out, c.firstErr.Error())
		}
	}
	return out[:min(3, len(out))]
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a number >= 0", name, s)
	}
	return n
}

// figures are what the test prints at the end.
type figures struct {
	seed       uint64
	agent      *testenv.Agent
	clients    []*client
	cycles     int
	restarts   []time.Duration
	held       int
	violations int
	// unknown and notApplied sum contiv_ipam_store_failures_total by
	// outcome over the runs, each scraped just before its kill.
	unknown, notApplied int
	// lateApplied counts the Adds whose caller gave up (deadline) and
	// that hold their address after the restart: written after their
	// caller left.
	lateApplied int
}

// lateApplied counts the keys of the cycle's Adds whose caller gave up
// and that are held, of unknown outcome still, and clears the lists.
func lateApplied(clients []*client, held []Allocation) int {
	holds := make(map[podmanager.AttachmentKey]bool, len(held))
	for _, al := range held {
		holds[al.Key] = true
	}
	n := 0
	for _, c := range clients {
		unknown := map[podmanager.AttachmentKey]bool{}
		for _, k := range c.ledger.Unknown() {
			unknown[k] = true
		}
		for _, k := range c.gaveUp {
			if holds[k] && unknown[k] {
				n++
			}
		}
		c.gaveUp = c.gaveUp[:0]
	}
	return n
}

// report logs the figures and prints them on one line for `make crash`.
func (f *figures) report(t *testing.T, name string) {
	var adds, dels, unknown, collected int
	for _, c := range f.clients {
		adds, dels, unknown = adds+c.ledger.AddsOK, dels+c.ledger.DeletesOK, unknown+c.ledger.Unknowns
		collected += c.ledger.Collected
	}
	sorted := slices.Sorted(slices.Values(f.restarts))
	var p50, maxR time.Duration
	if n := len(sorted); n > 0 {
		p50, maxR = sorted[(n-1)/2], sorted[n-1]
	}
	line := fmt.Sprintf("%s: cycles=%d clients=%d adds_acked=%d deletes_acked=%d unknown_outcomes=%d gc_released=%d "+
		"restart_p50=%s restart_max=%s allocations_held=%d violations=%d seed=%d",
		name, f.cycles, len(f.clients), adds, dels, unknown, collected, p50.Round(time.Millisecond), maxR.Round(time.Millisecond),
		f.held, f.violations, f.seed)
	t.Log(line)
	fmt.Println(line)
}

// scrape adds the agent's store failures by outcome to the figures.
func (f *figures) scrape(t *testing.T) {
	code, body := f.agent.Get(t, "/metrics")
	if code != 200 {
		t.Fatalf("GET /metrics: %d %s", code, body)
	}
	for _, line := range strings.Split(string(body), "\n") {
		i := strings.LastIndexByte(line, ' ') // a label value may hold spaces
		if i < 0 || !strings.HasPrefix(line, "contiv_ipam_store_failures_total{") {
			continue
		}
		name, value := line[:i], line[i+1:]
		n, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("/metrics: %q: %v", line, err)
		}
		switch {
		case strings.Contains(name, `outcome="unknown"`):
			f.unknown += int(n)
		case strings.Contains(name, `outcome="not applied"`):
			f.notApplied += int(n)
		}
	}
}
