package nodeipam

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/plugins/ksr/model/poolblock"
)

// errInjected is the error of an injected fault.
var errInjected = errors.New("injected: etcd timed out")

// fault is what happens to one write.
type fault int

const (
	noFault     fault = iota
	faultBefore       // fails without applying
	faultAfter        // applies, then fails: the caller cannot tell (a timeout)
)

// faultyBroker injects faults into the writing Txns (and, at random, into
// Get and List) of the broker it wraps, and logs the calls.
type faultyBroker struct {
	kvdb.Broker

	mu       sync.Mutex
	script   []fault    // the next writes' faults, in order
	rnd      *rand.Rand // when set: random faults, rate percent of each kind
	rate     int
	calls    []string // "txn", "txn:before", "txn:after", "txn:refused", "get <key>", "list <prefix>", "watch <prefix>"
	refusals int
	// watches are the watches made, for cutWatches and closeWatches.
	watches []*faultWatch
}

func (f *faultyBroker) next(write bool) fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	if write && len(f.script) > 0 {
		x := f.script[0]
		f.script = f.script[1:]
		return x
	}
	if f.rnd == nil || f.rate == 0 {
		return noFault
	}
	switch x := f.rnd.IntN(100); {
	case x < f.rate:
		return faultBefore
	case x < 2*f.rate && write:
		return faultAfter
	}
	return noFault
}

func (f *faultyBroker) log(call string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
}

// stop ends the random faults.
func (f *faultyBroker) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rnd = nil
}

func (f *faultyBroker) Txn(ctx context.Context, cmps []kvdb.Cmp, ops []kvdb.Op) (bool, error) {
	if len(ops) == 0 {
		return f.Broker.Txn(ctx, cmps, ops)
	}
	switch f.next(true) {
	case faultBefore:
		f.log("txn:before")
		return false, errInjected
	case faultAfter:
		_, err := f.Broker.Txn(ctx, cmps, ops)
		f.log("txn:after")
		return false, errors.Join(errInjected, err)
	}
	ok, err := f.Broker.Txn(ctx, cmps, ops)
	if err == nil && !ok {
		f.mu.Lock()
		f.refusals++
		f.mu.Unlock()
		f.log("txn:refused")
	} else {
		f.log("txn")
	}
	return ok, err
}

// Watch wraps the inner watch so that the test can break it the way the
// etcd plugin does (a compaction, a store replaced behind its endpoints):
// cutWatches makes it deliver nothing more, closeWatches then closes its
// channel. A watch never goes silent without closing (kvdb's contract).
func (f *faultyBroker) Watch(ctx context.Context, prefix string, fromRev int64) (<-chan kvdb.WatchEvent, error) {
	f.log("watch " + prefix)
	ctx, cancel := context.WithCancel(ctx)
	in, err := f.Broker.Watch(ctx, prefix, fromRev)
	if err != nil {
		cancel()
		return nil, err
	}
	w := &faultWatch{cut: make(chan struct{}), closed: make(chan struct{})}
	f.mu.Lock()
	f.watches = append(f.watches, w)
	f.mu.Unlock()
	out := make(chan kvdb.WatchEvent)
	go func() {
		defer cancel()
		defer close(out)
		w.forward(ctx, in, out)
	}()
	return out, nil
}

// faultWatch is one watch of a faultyBroker.
type faultWatch struct {
	cut    chan struct{} // closed: events are dropped
	closed chan struct{} // closed: the channel closes
	once   sync.Once
}

func (w *faultWatch) forward(ctx context.Context, in <-chan kvdb.WatchEvent, out chan<- kvdb.WatchEvent) {
	for {
		select {
		case ev, ok := <-in:
			if !ok {
				return
			}
			select {
			case <-w.cut:
				continue
			default:
			}
			select {
			case out <- ev:
			case <-w.closed:
				return
			case <-ctx.Done():
				return
			}
		case <-w.closed:
			return
		case <-ctx.Done():
			return
		}
	}
}

// cutWatches makes the watches made so far drop every event from now on.
func (f *faultyBroker) cutWatches() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, w := range f.watches {
		select {
		case <-w.cut:
		default:
			close(w.cut)
		}
	}
}

// closeWatches closes the channels of the watches made so far.
func (f *faultyBroker) closeWatches() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, w := range f.watches {
		w.once.Do(func() { close(w.closed) })
	}
}

func (f *faultyBroker) Get(ctx context.Context, key string) (kvdb.KeyValue, bool, error) {
	if f.next(false) != noFault {
		return kvdb.KeyValue{}, false, errInjected
	}
	f.log("get " + key)
	return f.Broker.Get(ctx, key)
}

func (f *faultyBroker) List(ctx context.Context, prefix string) ([]kvdb.KeyValue, int64, error) {
	if f.next(false) != noFault {
		return nil, 0, errInjected
	}
	f.log("list " + prefix)
	return f.Broker.List(ctx, prefix)
}

// count is how many calls were logged as call.
func (f *faultyBroker) count(call string) int {
	n := 0
	for _, c := range f.callLog() {
		if c == call {
			n++
		}
	}
	return n
}

func (f *faultyBroker) callLog() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// A grant write of unknown outcome keeps the blocks held, and the grants
// are read back before anything else is written: whether it landed or
// not, no block ends up in two grants and the node holds what it wants.
func TestPoolBlocksAWriteOfUnknownOutcomeIsReadBackFirst(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault fault
	}{{"failed before it applied", faultBefore}, {"applied, then failed", faultAfter}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			r := newPoolRig(t, "a", "b")
			db := &faultyBroker{Broker: r.db, script: []fault{tc.fault}}
			r.startOn(t, db, poolConfig("10.64.0.0/25"), nil) // two blocks
			r.claim(t, "a", 1, 0)
			g.Eventually(func(g Gomega) []string { return r.grant(g, "a") }).Should(HaveLen(1))
			r.claim(t, "b", 1, 0)
			g.Eventually(func(g Gomega) []string { return r.grant(g, "b") }).Should(HaveLen(1))
			g.Expect(r.grant(g, "a")).NotTo(Equal(r.grant(g, "b")))

			calls := db.callLog()
			i := slices.IndexFunc(calls, func(c string) bool { return c == "txn:before" || c == "txn:after" })
			g.Expect(i).To(BeNumerically(">=", 0))
			g.Expect(len(calls)).To(BeNumerically(">=", i+3))
			g.Expect(calls[i+1:i+3]).To(Equal([]string{"get " + DefaultPoolBlockGenerationKey, "list " + grantPrefix}),
				"the grants are read back before the next write")
			r.hist.check(t)
		})
	}
}

// Two servers that both believe they lead (no fence) race on the same
// claims: the compare-and-swap on the grant and the generation key
// refuses the stale one, which reads everything again. No block is ever
// in two grants and every claim is served.
func TestPoolBlocksTwoServersRacingLeaveNoDoubleGrant(t *testing.T) {
	g := NewWithT(t)
	names := []string{"n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7"}
	r := newPoolRig(t, names...)
	cfg := poolConfig("10.64.0.0/24")
	cfg.BlockSizeIPv4 = 28 // 16 blocks
	one := &faultyBroker{Broker: r.db}
	two := &faultyBroker{Broker: r.db}
	s1 := r.startOn(t, one, cfg, nil)
	s2 := r.startOn(t, two, cfg, nil)
	want := map[string]int{}
	for i, n := range names {
		want[n] = 1 + i%2 // 12 blocks in all
		r.claim(t, n, want[n], 0)
	}
	g.Eventually(func(g Gomega) {
		for _, n := range names {
			g.Expect(r.grant(g, n)).To(HaveLen(want[n]), "node %s", n)
		}
	}).WithTimeout(10 * time.Second).Should(Succeed())
	// The second round: every node releases its first block and wants as
	// many: the released blocks move to other nodes.
	for _, n := range names {
		blocks := r.grant(g, n)
		r.claim(t, n, want[n], 0, blocks[0])
	}
	g.Eventually(func(g Gomega) {
		seen := map[string]bool{}
		for _, n := range names {
			blocks := r.grant(g, n)
			g.Expect(blocks).To(HaveLen(want[n]), "node %s", n)
			for _, b := range blocks {
				g.Expect(seen[b]).To(BeFalse(), "block %s twice", b)
				seen[b] = true
				g.Expect(netip.MustParsePrefix(b).Bits()).To(Equal(28))
			}
		}
	}).WithTimeout(10 * time.Second).Should(Succeed())
	r.hist.check(t)
	// Both have handled every claim: the first write of the one behind was
	// made on a stale view.
	g.Eventually(func(g Gomega) {
		for _, s := range []*poolServer{s1, s2} {
			st := s.Status()
			g.Expect(st.Claims).To(Equal(len(names)))
			g.Expect(st.Pending).To(BeEmpty())
		}
	}).Should(Succeed())
	one.mu.Lock()
	two.mu.Lock()
	defer one.mu.Unlock()
	defer two.mu.Unlock()
	g.Expect(one.refusals+two.refusals).To(BeNumerically(">", 0), "the servers did race")
}

// A server whose view is stale (it read the grants before another server
// granted a block, and never handled that node since) is refused by the
// generation key when it hands the same block to another node; it reads
// the grants again and hands out another one.
func TestPoolBlocksAStaleServerIsRefusedByTheGeneration(t *testing.T) {
	g := NewWithT(t)
	r := newPoolRig(t, "a", "b")
	cfg := poolConfig(poolV4)
	staleDB := &faultyBroker{Broker: r.db}
	stale := r.prepare(t, staleDB, cfg, nil) // reads: nothing granted

	other := r.start(t, cfg, nil)
	r.claim(t, "a", 1, 0)
	g.Eventually(func(g Gomega) []string { return r.grant(g, "a") }).Should(Equal([]string{"10.64.0.0/26"}))
	_, err := r.db.Delete(t.Context(), claimKey("a")) // a's agent withdraws its claim: the grant stays
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(other.stop()).To(Succeed())

	stale.run()
	r.claim(t, "b", 1, 0)
	g.Eventually(func(g Gomega) []string { return r.grant(g, "b") }).Should(Equal([]string{"10.64.0.64/26"}))
	g.Expect(r.grant(g, "a")).To(Equal([]string{"10.64.0.0/26"}))
	staleDB.mu.Lock()
	g.Expect(staleDB.refusals).To(Equal(1), "b's first write, with 10.64.0.0/26, was refused")
	staleDB.mu.Unlock()
	r.hist.check(t)
}

// A claim watch that breaks after changes it never delivered (the etcd
// plugin closes a watch whose start revision was compacted, or whose store
// was replaced behind its endpoints) is followed by a list that finds them,
// and by a new watch that delivers the next change at once. There is no
// periodic list: nothing else would find them.
func TestPoolBlocksABrokenClaimWatchIsFollowedByAList(t *testing.T) {
	g := NewWithT(t)
	r := newPoolRig(t, "a")
	db := &faultyBroker{Broker: r.db}
	r.startOn(t, db, poolConfig(poolV4), nil)
	r.claim(t, "a", 1, 0)
	grantOfA := func(g Gomega) []string { return r.grant(g, "a") }
	g.Eventually(grantOfA).Should(Equal([]string{"10.64.0.0/26"}))

	lists := func() int { return db.count("list " + claimPrefix) }
	listed := lists() // Start's
	db.cutWatches()
	r.claim(t, "a", 2, 0)
	g.Consistently(grantOfA).WithTimeout(200*time.Millisecond).Should(HaveLen(1), "the cut watch delivers nothing")
	g.Expect(lists()).To(Equal(listed), "no list while the watch is open")
	db.closeWatches()
	g.Eventually(grantOfA).Should(HaveLen(2), "the list after the broken watch found the claim")
	g.Expect(lists()).To(Equal(listed + 1))

	r.claim(t, "a", 3, 0)
	g.Eventually(grantOfA).WithTimeout(2*time.Second).Should(HaveLen(3), "the new watch delivers")
}

// The list after a broken watch takes every claim as listed, even one at
// the mod revision the server knew: a store replaced behind its endpoints
// starts its revisions again, so the same revision can hold another claim.
func TestPoolBlocksTheListAfterABrokenWatchTrustsNoRevision(t *testing.T) {
	g := NewWithT(t)
	r := newPoolRig(t, "a")
	r.claim(t, "a", 1, 0)
	s := r.prepare(t, r.db, poolConfig(poolV4), nil)
	kv, found, err := r.db.Get(t.Context(), claimKey("a"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue())

	other, err := json.Marshal(poolblock.Claim{Node: "a", Want: map[string]int{"ipv4": 2}})
	g.Expect(err).NotTo(HaveOccurred())
	replaced := &listBroker{Broker: r.db, kvs: []kvdb.KeyValue{{Key: kv.Key, Value: other, Revision: kv.Revision}}}
	s.db = replaced
	_, err = s.relistClaims(t.Context())
	g.Expect(err).NotTo(HaveOccurred())
	s.mu.Lock()
	defer s.mu.Unlock()
	g.Expect(s.claims["a"].Want).To(Equal(map[string]int{"ipv4": 2}))
}

// listBroker lists kvs, at revision 1, whatever is stored.
type listBroker struct {
	kvdb.Broker
	kvs []kvdb.KeyValue
}

func (b *listBroker) List(context.Context, string) ([]kvdb.KeyValue, int64, error) {
	return b.kvs, 1, nil
}
