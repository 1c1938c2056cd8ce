package elastic

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/contiv-ipam/agent/tests/cluster"
	"github.com/contiv-ipam/agent/tests/crash"
)

// crashClients add with crashPace between their Adds.
const (
	crashClients = 8
	crashPace    = 150 * time.Millisecond
)

// crashMsg is the agent's log line of a warm-target crossing: a claim is
// about to be written.
const crashMsg = "free pod addresses below the warm target: asking for a pool"

// loader runs crashClients clients, each with a crash.Ledger, that add
// fresh containers until stopped or the agent's socket breaks.
type loader struct {
	ledgers []*crash.Ledger
	next    []int
	stop    chan struct{}
	wg      sync.WaitGroup
}

func newLoader() *loader {
	l := &loader{ledgers: make([]*crash.Ledger, crashClients), next: make([]int, crashClients)}
	for i := range l.ledgers {
		l.ledgers[i] = crash.NewLedger()
	}
	return l
}

// start runs the clients on socket until halt.
func (l *loader) start(t *testing.T, socket string) {
	l.stop = make(chan struct{})
	for w := range crashClients {
		c := dialCNI(t, socket)
		l.wg.Go(func() {
			defer c.close()
			time.Sleep(time.Duration(w) * crashPace / crashClients)
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				l.next[w]++
				cid := fmt.Sprintf("crash-c%d-%04d", w, l.next[w])
				a, err := c.add(cid)
				if err != nil {
					l.ledgers[w].AddUnknown(key(cid), "_container/"+cid)
					if c := status.Code(err); c == codes.Unavailable || c == codes.DeadlineExceeded || c == codes.Canceled {
						return
					}
				} else {
					l.ledgers[w].AddOK(key(cid), "_container/"+cid, a)
				}
				time.Sleep(crashPace)
			}
		})
	}
}

// halt stops the clients and waits for them.
func (l *loader) halt() {
	close(l.stop)
	l.wg.Wait()
}

// crossings counts the warm-target crossings in the agent's log.
func crossings(t testing.TB, a *cluster.Agent) int { return len(logged(t, a.Log, crashMsg)) }

// waitCrossing waits until the agent's log has more than n crossings.
func waitCrossing(t *testing.T, a *cluster.Agent, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for crossings(t, a) <= n {
		if time.Now().After(deadline) {
			t.Fatalf("no warm-target crossing within 20 s; agent log %s", a.Log)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// allocations reads the agent's allocations as crash.Allocations.
func allocations(t *testing.T, a *cluster.Agent) []crash.Allocation {
	t.Helper()
	rest, err := a.Allocations(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	out := make([]crash.Allocation, 0, len(rest))
	for _, p := range rest {
		ip, err := netip.ParseAddr(p.Addr())
		if err != nil {
			t.Fatalf("allocation %+v: %v", p, err)
		}
		k := key(p.ContainerID)
		k.Network, k.IfName = p.Network, p.IfName
		out = append(out, crash.Allocation{Key: k, Pod: p.PodID.Namespace + "/" + p.PodID.Name, Addr: ip})
	}
	return out
}

// TestElasticCrash grows a node under 8 CNI clients and SIGKILLs, each at
// a warm-target crossing (a claim about to be written or just granted),
// first the agent (restarted on its bolt file), then contiv-ksr (a new
// replica started while the clients go on). At the end no block is in two
// grants, the agent's pools are its subnet plus exactly its grant, every
// acknowledged Add still holds its address and no address is held twice
// (tests/crash's Ledger and Check).
func TestElasticCrash(t *testing.T) {
	g := NewWithT(t)
	r := startRig(t)
	ctx := t.Context()
	l := newLoader()
	t.Cleanup(func() { logGrowth(t, r.agent) })

	// The agent, mid-growth.
	for range 2 {
		n := crossings(t, r.agent)
		l.start(t, r.agent.Socket)
		waitCrossing(t, r.agent, n)
		g.Expect(r.agent.Kill()).To(Succeed())
		l.halt()
		r.agent = r.startAgent(t)
		g.Expect(crash.Check(l.ledgers, network, allocations(t, r.agent))).To(BeEmpty(), "after the agent's restart")
	}

	// contiv-ksr, mid-growth.
	n := crossings(t, r.agent)
	l.start(t, r.agent.Socket)
	waitCrossing(t, r.agent, n)
	r.ksr.kill()
	time.Sleep(500 * time.Millisecond) // the clients go on without a server
	r.ksr = r.startKSR(t)
	n = crossings(t, r.agent)
	waitCrossing(t, r.agent, n)
	time.Sleep(500 * time.Millisecond)
	l.halt()

	// Settled.
	g.Eventually(func() (string, error) {
		granted, err := grantOf(ctx, r.cli, node)()
		if err != nil {
			return "", err
		}
		s, err := pools(ctx, r.agent)
		if ps := poolCIDRs(s); err == nil && !slices.Equal(ps[1:], granted) {
			return fmt.Sprintf("added pools %v, grant %v", ps[1:], granted), nil
		}
		return "", err
	}).WithTimeout(15*time.Second).Should(BeEmpty(), "the agent's added pools = its grant")
	all, err := grants(ctx, r.cli)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(doubleGranted(all)).To(BeEmpty(), "grants %v", all)
	got := allocations(t, r.agent)
	g.Expect(crash.Check(l.ledgers, network, got)).To(BeEmpty(), "at the end")
	s, err := pools(ctx, r.agent)
	g.Expect(err).NotTo(HaveOccurred())
	for _, a := range got {
		g.Expect(slices.ContainsFunc(poolCIDRs(s), func(p string) bool { return netip.MustParsePrefix(p).Contains(a.Addr) })).
			To(BeTrue(), "address %s of %s outside the pools %v", a.Addr, a.Key, poolCIDRs(s))
	}
	acked, unknown := 0, 0
	for _, lg := range l.ledgers {
		acked += lg.AddsOK
		unknown += lg.Unknowns
	}
	t.Logf("acknowledged Adds %d, unknown or failed %d, held %d, pools %s", acked, unknown, len(got),
		strings.Join(poolCIDRs(s), ","))
}
