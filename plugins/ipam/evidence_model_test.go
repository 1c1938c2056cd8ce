package ipam_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ksr/model/mirror"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// The evidence model test: thousands of short random runs of one node's
// life, each on a fresh agent, as Kubernetes, kubelet, contiv-ksr and
// etcd would drive it: pods created, force-deleted and re-created under
// the same name (new UIDs), kubelet's ADDs and DELs, the mirror's events
// delivered late, twice or out of date, values that are not markers,
// contiv-ksr stopped and resumed, etcd emptied and restored, agent
// restarts on the same store, and time. After every step:
//   - no sandbox that runs has lost its address;
//   - no address is held by two running sandboxes.
// At the end of a run contiv-ksr runs and beats for two grace periods:
// then every address of a sandbox that no longer runs is free (the
// evidence rule is not a rule that never releases).
//
// In half the runs the container runtime is a witness (criSocket,
// keeper/runtime.go): the agent lists its sandboxes now and then (some
// lists fail), runs the GC against them, and kubelet may be away when a
// pod is force-deleted, so that its sandbox runs on, missing from
// Kubernetes, for as long as kubelet stays away.
//
// EVIDENCE_RUNS sets the number of runs (default 10000; 1000 under the
// race detector), EVIDENCE_SEED the seed (default: random, logged).

const (
	evGrace = time.Minute
	evBeat  = 10 * time.Second
	evNames = 3 // pod names: each re-created many times
)

// memStore is an in-memory kvdb.Broker that outlives the agents of a run
// (a restart finds what the last one stored), with etcd's transaction
// semantics; Watch is not used by IPAM.
type memStore struct {
	mu  sync.Mutex
	kvs map[string][]byte
	rev int64
}

func newMemStore() *memStore { return &memStore{kvs: map[string][]byte{}} }

func (m *memStore) Put(ctx context.Context, key string, value []byte) error {
	_, err := m.Txn(ctx, nil, []kvdb.Op{kvdb.PutOp(key, value)})
	return err
}

func (m *memStore) Get(_ context.Context, key string) (kvdb.KeyValue, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.kvs[key]
	return kvdb.KeyValue{Key: key, Value: bytes.Clone(v), Revision: m.rev}, ok, nil
}

func (m *memStore) List(_ context.Context, prefix string) ([]kvdb.KeyValue, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []kvdb.KeyValue
	for k, v := range m.kvs {
		if strings.HasPrefix(k, prefix) {
			out = append(out, kvdb.KeyValue{Key: k, Value: bytes.Clone(v), Revision: m.rev})
		}
	}
	slices.SortFunc(out, func(a, b kvdb.KeyValue) int { return strings.Compare(a.Key, b.Key) })
	return out, m.rev, nil
}

func (m *memStore) Delete(_ context.Context, key string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.kvs[key]
	delete(m.kvs, key)
	m.rev++
	return ok, nil
}

func (m *memStore) Txn(_ context.Context, cmps []kvdb.Cmp, ops []kvdb.Op) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range cmps {
		v, ok := m.kvs[c.Key]
		switch {
		case c.Kind == kvdb.CmpAbsent && ok, c.Kind == kvdb.CmpValue && (!ok || !bytes.Equal(v, c.Value)):
			return false, nil
		case c.Kind == kvdb.CmpModRevision:
			return false, errors.New("memStore: mod revisions are not kept")
		}
	}
	for _, op := range ops {
		if op.Kind == kvdb.OpPut {
			m.kvs[op.Key] = bytes.Clone(op.Value)
		} else {
			delete(m.kvs, op.Key)
		}
	}
	m.rev++
	return true, nil
}

func (m *memStore) Watch(context.Context, string, int64) (<-chan kvdb.WatchEvent, error) {
	return nil, errors.New("memStore: no watch")
}

// evSandbox is one pod instance: its UID, its attachment, its address
// once added, and whether its sandbox runs.
type evSandbox struct {
	name, uid string
	key       podmanager.AttachmentKey
	ip        string
	running   bool
	inAPI     bool
	deletedAt time.Time // when it left the API
	// orphan: kubelet was away when the pod left the API; the sandbox
	// runs until kubeletBack (runs with a runtime witness only).
	orphan bool
}

func (s *evSandbox) id() podmodel.ID { return podmodel.ID{Name: s.name, Namespace: "model"} }

// evEvent is a change of the mirror as the watch delivers it.
type evEvent struct {
	name, uid string
	deleted   bool
}

// evRun is one run.
type evRun struct {
	t       *testing.T
	g       Gomega
	rng     *rand.Rand
	clk     *fakeClock
	store   *memStore
	f       *fixture
	log     []string
	seq     int
	all     []*evSandbox
	ksrUp   bool
	hb      time.Time
	emptied bool      // etcd lost its state
	pending []evEvent // mirror changes not yet delivered
	// lagging are pods contiv-ksr's informer has not seen yet (it beats
	// meanwhile: its informer's lag is not known to it), each with when
	// it was created; they reach etcd within half a grace period.
	lagging map[string]time.Time
	sent    []evEvent             // delivered ones (replayed late or twice)
	mirror  map[string]string     // what etcd holds: name -> uid
	api     map[string]*evSandbox // what the API holds: name -> instance
	rt      bool                  // the runtime is a witness
}

func TestEvidenceModel(t *testing.T) {
	runs := 10000
	if raceOn {
		runs = 1000
	}
	if v := os.Getenv("EVIDENCE_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("EVIDENCE_RUNS %q: %v", v, err)
		}
		runs = n
	}
	seed := rand.Uint64()
	if v := os.Getenv("EVIDENCE_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("EVIDENCE_SEED %q: %v", v, err)
		}
		seed = s
	}
	t.Logf("seed %d, %d runs (EVIDENCE_SEED=%d EVIDENCE_RUNS=%d reproduces them)", seed, runs, seed, runs)
	start := time.Now()
	for i := range runs {
		r := &evRun{t: t, rng: rand.New(rand.NewPCG(seed, uint64(i))), clk: newFakeClock(), store: newMemStore(),
			mirror: map[string]string{}, api: map[string]*evSandbox{}, ksrUp: true, lagging: map[string]time.Time{},
			hb: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), rt: i%2 == 1}
		if !r.play() {
			t.Fatalf("run %d of seed %d failed; its steps:\n%s", i, seed, strings.Join(r.log, "\n"))
		}
	}
	t.Logf("%d runs in %s", runs, time.Since(start).Round(time.Millisecond))
}

// play runs 40 random steps and the final look; false on a violation
// (the failures are recorded on r.t).
func (r *evRun) play() bool {
	failed := false
	r.g = NewGomega(func(message string, _ ...int) {
		failed = true
		r.t.Errorf("%s", message)
	})
	r.start()
	for range 40 {
		r.step()
		if failed || !r.check() {
			r.f.close(r.t)
			return false
		}
	}
	r.settle()
	r.f.close(r.t)
	return !failed
}

func (r *evRun) note(format string, args ...any) {
	r.log = append(r.log, fmt.Sprintf("%s  "+format, append([]any{r.clk.Now().Format("15:04:05.000")}, args...)...))
}

// start runs a new agent on the run's store and resyncs it with etcd.
func (r *evRun) start() {
	f, err := newFixture(r.t, fixtureOpts{db: r.store, clock: r.clk, grace: evGrace, runtime: r.rt, runtimeGC: evGrace}, r.state())
	r.g.Expect(err).NotTo(HaveOccurred())
	r.f = f
	r.note("agent started (runtime witness %t)", r.rt)
}

// state is etcd's state as a resync lists it.
func (r *evRun) state() api.KubeStateData {
	ks := api.KubeStateData{podmodel.Keyword: {}, mirror.Keyword: {}}
	if r.emptied {
		return ks
	}
	for name, uid := range r.mirror {
		ks[podmodel.Keyword][podmodel.Key(name, "model")] = &podmodel.Pod{Name: name, Namespace: "model", Uid: uid}
	}
	ks[podmodel.Keyword][podmodel.Key("elsewhere", "other")] = &podmodel.Pod{Name: "elsewhere", Namespace: "other"}
	ks[mirror.Keyword][mirror.Key] = marker(r.t, r.hb, len(r.mirror)+1, evBeat.String())
	return ks
}

func (r *evRun) step() {
	switch n := r.rng.IntN(100); {
	case n < 14:
		r.create()
	case n < 24:
		r.apiDelete()
	case n < 34:
		r.kubeletDel()
	case n < 54:
		r.deliver()
	case n < 58:
		r.replay()
	case n < 66:
		r.beat()
	case n < 68:
		r.badMarker()
	case n < 72:
		r.toggleKSR()
	case n < 75:
		r.toggleEmpty()
	case n < 78:
		r.restart()
	case n < 82:
		r.resync()
	case n < 88 && r.rt:
		r.lookAtRuntime()
	case n < 90 && r.rt:
		r.kubeletBack()
	default:
		r.advance(time.Duration(r.rng.Int64N(int64(evGrace))))
	}
}

// create makes a pod under a name the API does not hold, and kubelet
// ADDs its sandbox.
func (r *evRun) create() {
	name := fmt.Sprintf("p%d", r.rng.IntN(evNames))
	if r.api[name] != nil {
		return
	}
	r.seq++
	uid := fmt.Sprintf("uid-%d", r.seq)
	s := &evSandbox{name: name, uid: uid, inAPI: true,
		key: podmanager.AttachmentKey{Network: "net", ContainerID: "sb-" + uid, IfName: "eth0"}}
	r.api[name] = s
	if r.rng.IntN(2) == 0 {
		r.lagging[name] = r.clk.Now()
	} else {
		r.mirrorPut(name, uid)
	}
	ev := podmanager.NewAddPod()
	ev.Pod, ev.PodUID, ev.Key, ev.NetworkNamespace = s.id(), uid, s.key, "/var/run/netns/"+s.key.ContainerID
	if _, err := r.f.ipam.Update(ev, nil); err != nil || ev.Wait(context.Background()) != nil {
		r.note("create %s %s: ADD failed (%v)", name, uid, err)
		return
	}
	s.ip, s.running = addr(ev), true
	r.all = append(r.all, s)
	r.note("create %s %s: ADD -> %s", name, uid, s.ip)
}

// apiDelete force-deletes a pod from the API; its sandbox runs until
// kubelet's DEL (within a grace period: see advance).
func (r *evRun) apiDelete() {
	for name, s := range r.api {
		delete(r.api, name)
		s.inAPI, s.deletedAt = false, r.clk.Now()
		s.orphan = r.rt && r.rng.IntN(3) == 0
		delete(r.lagging, name)
		r.mirrorDelete(name, s.uid)
		r.note("API delete %s %s", name, s.uid)
		return
	}
}

// kubeletDel tears down one sandbox of a pod the API no longer holds.
func (r *evRun) kubeletDel() {
	for _, s := range r.all {
		if s.running && !s.inAPI {
			r.del(s)
			return
		}
	}
}

func (r *evRun) del(s *evSandbox) {
	_, err := deletePod(r.f.ipam, s.id(), s.key)
	r.g.Expect(err).NotTo(HaveOccurred())
	s.running = false
	r.note("kubelet DEL %s %s", s.name, s.uid)
}

// mirrorPut and mirrorDelete are contiv-ksr's writes: nothing while it is
// stopped (it catches up when it resumes).
func (r *evRun) mirrorPut(name, uid string) {
	if r.ksrUp && !r.emptied {
		r.mirror[name] = uid
		r.pending = append(r.pending, evEvent{name: name, uid: uid})
	}
}

func (r *evRun) mirrorDelete(name, uid string) {
	if r.ksrUp && !r.emptied && r.mirror[name] == uid {
		delete(r.mirror, name)
		r.pending = append(r.pending, evEvent{name: name, uid: uid, deleted: true})
	}
}

// deliver hands the agent the oldest change its watch has not delivered.
func (r *evRun) deliver() {
	if len(r.pending) == 0 {
		return
	}
	e := r.pending[0]
	r.pending = r.pending[1:]
	r.send(e)
	r.sent = append(r.sent, e)
}

// replay hands the agent a change it had already (a late or repeated
// event: a stale delete of an old UID, a put seen before).
func (r *evRun) replay() {
	if len(r.sent) == 0 {
		return
	}
	e := r.sent[r.rng.IntN(len(r.sent))]
	if !e.deleted && r.mirror[e.name] != e.uid {
		return // an old put would be an old snapshot: see toggleEmpty
	}
	r.send(e)
}

func (r *evRun) send(e evEvent) {
	pod := &podmodel.Pod{Name: e.name, Namespace: "model", Uid: e.uid}
	ev := &api.KubeStateChange{Resource: podmodel.Keyword, Key: podmodel.Key(e.name, "model"), NewValue: pod}
	if e.deleted {
		ev.NewValue, ev.PrevValue = nil, pod
	}
	_, err := r.f.ipam.Update(ev, nil)
	r.g.Expect(err).NotTo(HaveOccurred())
	r.note("event %+v", e)
}

// catchUp is contiv-ksr's informer seeing a lagging pod: it mirrors it.
func (r *evRun) catchUp(name string) {
	delete(r.lagging, name)
	if s := r.api[name]; s != nil {
		r.mirrorPut(name, s.uid)
		r.note("contiv-ksr's informer caught up with %s", name)
	}
}

// beat is contiv-ksr's heartbeat, once its writes are delivered.
func (r *evRun) beat() {
	if !r.ksrUp || r.emptied || len(r.pending) > 0 {
		return
	}
	r.hb = r.hb.Add(evBeat)
	ev := &api.KubeStateChange{Resource: mirror.Keyword, Key: mirror.Key, NewValue: marker(r.t, r.hb, len(r.mirror)+1, evBeat.String())}
	_, err := r.f.ipam.Update(ev, nil)
	r.g.Expect(err).NotTo(HaveOccurred())
	r.note("beat %s", r.hb.Format("15:04:05"))
}

// badMarker is a value under the marker's key that is not a marker.
func (r *evRun) badMarker() {
	ev := &api.KubeStateChange{Resource: mirror.Keyword, Key: mirror.Key, NewValue: marker(r.t, time.Time{}, -1, "soon")}
	_, err := r.f.ipam.Update(ev, nil)
	r.g.Expect(err).NotTo(HaveOccurred())
	r.note("a value that is not a marker")
}

// toggleKSR stops contiv-ksr, or resumes it: a resumed one resyncs etcd
// with the API (the agent sees it through the watch), then beats.
func (r *evRun) toggleKSR() {
	r.ksrUp = !r.ksrUp
	if !r.ksrUp {
		r.note("contiv-ksr stopped")
		return
	}
	r.note("contiv-ksr resumed")
	r.lagging = map[string]time.Time{} // its informers list the API
	if r.emptied {
		return
	}
	for name, uid := range r.mirror {
		if s := r.api[name]; s == nil || s.uid != uid {
			delete(r.mirror, name)
			r.pending = append(r.pending, evEvent{name: name, uid: uid, deleted: true})
		}
	}
	for name, s := range r.api {
		if r.mirror[name] != s.uid {
			r.mirror[name] = s.uid
			r.pending = append(r.pending, evEvent{name: name, uid: s.uid})
		}
	}
}

// toggleEmpty empties etcd (the agent re-lists an empty store), or
// restores it (contiv-ksr's next resync writes it again).
func (r *evRun) toggleEmpty() {
	r.emptied = !r.emptied
	r.pending = nil
	if r.emptied {
		r.note("etcd emptied")
	} else {
		r.mirror = map[string]string{}
		for name, s := range r.api {
			if r.ksrUp {
				r.mirror[name] = s.uid
			}
		}
		r.note("etcd restored (%d pods)", len(r.mirror))
	}
	r.resync()
}

// restart kills the agent and starts another on the same store.
func (r *evRun) restart() {
	r.f.close(r.t)
	r.pending = nil // the new agent lists etcd
	r.start()
}

// resync is a remote DB resync: the agent lists etcd.
func (r *evRun) resync() {
	r.pending = nil
	ks := r.state()
	r.g.Expect(r.f.ipam.Resync(&api.DBResync{KubeState: ks}, ks, r.seq, nil)).To(Succeed())
	r.note("resync (%d pods, emptied %t)", len(r.mirror), r.emptied)
}

// advance moves the clock; kubelet tears down a sandbox whose pod left
// the API within half a grace period (as it does, promptly), or the
// sandbox dies without a DEL (a node reboot, a kubelet that missed it):
// then only the evidence rule frees its address.
func (r *evRun) advance(d time.Duration) {
	for _, s := range r.all {
		if !s.running || s.inAPI || s.orphan || r.clk.Now().Add(d).Before(s.deletedAt.Add(evGrace/2)) {
			continue
		}
		if r.rng.IntN(2) == 0 {
			r.del(s)
			continue
		}
		s.running = false
		r.note("sandbox of %s %s gone without a DEL", s.name, s.uid)
	}
	for name, at := range r.lagging {
		if !r.clk.Now().Add(d).Before(at.Add(evGrace / 2)) {
			r.catchUp(name)
		}
	}
	r.clk.Advance(d)
	r.note("clock +%s", d.Round(time.Second))
}

// lookAtRuntime is one list of the runtime's sandboxes (the running
// ones), or one that fails.
func (r *evRun) lookAtRuntime() {
	if r.rng.IntN(5) == 0 {
		lookFails(r.g, r.f.ipam)
		r.note("runtime list failed")
		return
	}
	sbs := r.running()
	look(r.g, r.f.ipam, sbs...)
	r.note("runtime listed %d sandboxes", len(sbs))
}

// kubeletBack is kubelet returning: it tears down the orphaned sandboxes
// (with a DEL, or they are gone without one).
func (r *evRun) kubeletBack() {
	for _, s := range r.all {
		if !s.running || !s.orphan {
			continue
		}
		s.orphan = false
		if r.rng.IntN(2) == 0 {
			r.del(s)
			continue
		}
		s.running = false
		r.note("orphaned sandbox of %s %s gone without a DEL", s.name, s.uid)
	}
}

// beatFor lets contiv-ksr beat (and the runtime be listed) for d.
func (r *evRun) beatFor(d time.Duration) {
	for range int(d/evBeat) + 2 {
		for len(r.pending) > 0 {
			r.deliver()
		}
		r.beat()
		if r.rt {
			look(r.g, r.f.ipam, r.running()...)
		}
		r.advance(evBeat)
	}
}

// running lists the running sandboxes as the runtime would.
func (r *evRun) running() []podmanager.Sandbox {
	var sbs []podmanager.Sandbox
	for _, s := range r.all {
		if s.running {
			sbs = append(sbs, podmanager.Sandbox{ID: s.key.ContainerID, Pod: s.id(), UID: s.uid, Ready: true})
		}
	}
	return sbs
}

// check asserts the invariants; false on a violation.
func (r *evRun) check() bool {
	seen := map[string]string{}
	for _, s := range r.all {
		if !s.running {
			continue
		}
		if got := attIP(r.g, r.f.ipam, s.key); got != s.ip+"/29" && !strings.HasPrefix(got, s.ip+"/") {
			r.t.Errorf("the running sandbox of %s %s lost its address %s (holds %q)", s.name, s.uid, s.ip, got)
			return false
		}
		if other, ok := seen[s.ip]; ok {
			r.t.Errorf("%s held by two running sandboxes: %s and %s", s.ip, other, s.uid)
			return false
		}
		seen[s.ip] = s.uid
	}
	return true
}

// settle restores etcd and contiv-ksr, lets it beat for two grace
// periods (kubelet still away: orphaned sandboxes keep their addresses),
// brings kubelet back, lets it beat for two more, and checks that every
// sandbox that no longer runs has given its address back, and every
// running one kept it.
func (r *evRun) settle() {
	if r.emptied {
		r.toggleEmpty()
	}
	if !r.ksrUp {
		r.toggleKSR()
	}
	r.beatFor(2 * evGrace) // kubelet may still be away: orphans run on
	if !r.check() {
		return
	}
	r.kubeletBack()
	r.beatFor(2 * evGrace)
	r.g.Eventually(func() []string {
		var held []string
		for _, s := range r.all {
			if !s.running && attIP(r.g, r.f.ipam, s.key) != "" {
				held = append(held, s.name+" "+s.uid)
			}
		}
		return held
	}).WithTimeout(10*time.Second).WithPolling(time.Millisecond).Should(BeEmpty(), "sandboxes gone: addresses free")
	r.check()
}
