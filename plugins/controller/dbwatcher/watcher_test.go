package dbwatcher_test

import (
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/health"
	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/controller/dbresources"
	"github.com/contiv-ipam/agent/plugins/controller/dbwatcher"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	"github.com/contiv-ipam/agent/plugins/ksr/model/node"
	"github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
)

// Sample values.
var (
	nodeA   = &node.Node{Name: "a", Pod_CIDR: "10.1.1.0/24"}
	nodeA2  = &node.Node{Name: "a", Pod_CIDR: "10.1.2.0/24"}
	nodeB   = &node.Node{Name: "b", Pod_CIDR: "10.1.3.0/24"}
	nodeB2  = &node.Node{Name: "b", Pod_CIDR: "10.1.4.0/24"}
	podWeb  = &pod.Pod{Name: "web", Namespace: "default", IpAddress: "10.1.1.5"}
	vppNode = &vppnode.VppNode{Id: 1, Name: "a", IpAddresses: []string{"192.168.16.1/24"}}
)

func TestNewNamesMissingFields(t *testing.T) {
	_, etcdPlugin := startEtcd(t)
	loop := &fakeLoop{}
	cases := []struct {
		name string
		cfg  dbwatcher.Config
		want []string
	}{
		{"no remote", dbwatcher.Config{Loop: loop}, []string{"Remote"}},
		{"no loop", dbwatcher.Config{Remote: etcdPlugin}, []string{"Loop"}},
		{"nothing", dbwatcher.Config{}, []string{"Remote", "Loop"}},
		{"negative delay", dbwatcher.Config{Remote: etcdPlugin, Loop: loop, DelayLocalResync: -time.Second},
			[]string{"DelayLocalResync", "-1s"}},
		{"negative retry", dbwatcher.Config{Remote: etcdPlugin, Loop: loop, RetryInterval: -time.Second},
			[]string{"RetryInterval"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			w, err := dbwatcher.New(c.cfg)
			g.Expect(w).To(BeNil())
			for _, s := range c.want {
				g.Expect(err).To(MatchError(ContainSubstring(s)))
			}
		})
	}
	w, err := dbwatcher.New(dbwatcher.Config{Remote: etcdPlugin, Loop: loop})
	NewWithT(t).Expect(err).NotTo(HaveOccurred(), "Local, Log and the durations are optional")
	w.Stop()
}

func TestRemoteResyncAtStart(t *testing.T) {
	g := NewWithT(t)
	_, remote := startEtcd(t)
	local := tempBolt(t)
	put(t, remote, node.Key("a"), nodeA)
	put(t, remote, pod.Key("web", "default"), podWeb)
	put(t, remote, vppnode.Key(1), vppNode)
	put(t, remote, "no-such-resource/x", "{}")
	put(t, remote, node.Key("broken"), "not json")
	// An earlier run left a key that is gone from etcd and an old value.
	mirror := local.NewBroker(mirrorPrefix)
	g.Expect(mirror.Put(t.Context(), node.Key("gone"), encode(t, nodeB))).To(Succeed())
	g.Expect(mirror.Put(t.Context(), node.Key("a"), encode(t, nodeA2))).To(Succeed())

	loop := &fakeLoop{}
	w := startWatcher(t, dbwatcher.Config{Remote: remote, Local: local, Loop: loop})

	first := loop.nthResync(g, 1)
	g.Expect(loop.all()[0]).To(BeIdenticalTo(first), "the first event is the DB resync")
	g.Expect(first.Local).To(BeFalse())
	g.Expect(first.KubeState).To(HaveLen(len(dbresources.Keywords())))
	for _, kw := range dbresources.Keywords() {
		g.Expect(first.KubeState).To(HaveKey(kw), "every keyword is present, even empty")
	}
	g.Expect(first.KubeState.Len()).To(Equal(3))
	expectValue(g, first.KubeState, "node", node.Key("a"), nodeA)
	expectValue(g, first.KubeState, "pod", pod.Key("web", "default"), podWeb)
	expectValue(g, first.KubeState, "vppnode", vppnode.Key(1), vppNode)

	g.Expect(mirrorContent(g, local)).To(Equal(map[string]string{
		node.Key("a"):             string(encode(t, nodeA)),
		pod.Key("web", "default"): string(encode(t, podWeb)),
		vppnode.Key(1):            string(encode(t, vppNode)),
	}), "the mirror holds the decoded keys' raw values, the stale key is gone")
	st := w.Stats()
	g.Expect(st.RemoteResyncs).To(BeEquivalentTo(1))
	g.Expect(st.DecodeErrors).To(BeEquivalentTo(2), "the unknown key and the bad value")
	g.Consistently(loop.count).WithTimeout(waitShort).Should(Equal(1))
}

func TestLargeStateIsMirroredInBatches(t *testing.T) {
	g := NewWithT(t)
	_, remote := startEtcd(t)
	local := tempBolt(t)
	const nodes, stale = 3*kvdb.MaxTxnOps + 1, kvdb.MaxTxnOps + 1
	var ops []kvdb.Op
	want := map[string]string{}
	for i := range nodes {
		key := node.Key("n" + itoa(i))
		value := encode(t, &node.Node{Name: "n" + itoa(i)})
		ops = append(ops, kvdb.PutOp(codec.KSRPrefix+key, value))
		want[key] = string(value)
	}
	for batch := range slices.Chunk(ops, kvdb.MaxTxnOps) {
		_, err := remote.Txn(t.Context(), nil, batch)
		g.Expect(err).NotTo(HaveOccurred())
	}
	mirror := local.NewBroker(mirrorPrefix)
	for i := range stale {
		g.Expect(mirror.Put(t.Context(), pod.Key("old"+itoa(i), "default"), []byte("{}"))).To(Succeed())
	}

	loop := &fakeLoop{}
	startWatcher(t, dbwatcher.Config{Remote: remote, Local: local, Loop: loop})
	g.Expect(loop.nthResync(g, 1).KubeState["node"]).To(HaveLen(nodes))
	g.Expect(mirrorContent(g, local)).To(Equal(want))
}

// A value too large for the mirror is left out alone: every other key of
// the state is mirrored (in batches), the state pushed to the loop keeps
// the large value, and the skip is counted. A change to a value too large
// deletes the key from the mirror rather than keep its older value.
func TestOversizedValueIsLeftOutOfTheMirror(t *testing.T) {
	g := NewWithT(t)
	_, etcdPlugin := startEtcd(t)
	bigPod := &pod.Pod{Name: "big", Namespace: "default",
		Annotations: map[string]string{"last-applied": strings.Repeat("x", kvdb.MaxValueLen)}}
	remote := &breakableStore{Store: &extraValueStore{Store: etcdPlugin,
		extra: kvdb.KeyValue{Key: pod.Key("big", "default"), Value: encode(t, bigPod), Revision: 1}}}
	local := tempBolt(t)
	const nodes = 3 * kvdb.MaxTxnOps
	want := map[string]string{}
	var ops []kvdb.Op
	for i := range nodes {
		key := node.Key("n" + itoa(i))
		value := encode(t, &node.Node{Name: "n" + itoa(i)})
		ops = append(ops, kvdb.PutOp(codec.KSRPrefix+key, value))
		want[key] = string(value)
	}
	for batch := range slices.Chunk(ops, kvdb.MaxTxnOps) {
		_, err := etcdPlugin.Txn(t.Context(), nil, batch)
		g.Expect(err).NotTo(HaveOccurred())
	}
	put(t, etcdPlugin, pod.Key("web", "default"), podWeb)
	want[pod.Key("web", "default")] = string(encode(t, podWeb))

	loop := &fakeLoop{}
	w := startWatcher(t, dbwatcher.Config{Remote: remote, Local: local, Loop: loop})
	state := loop.nthResync(g, 1).KubeState
	g.Expect(state["pod"]).To(HaveKey(pod.Key("big", "default")), "the loop gets the large value")
	g.Expect(mirrorContent(g, local)).To(Equal(want), "every other key is mirrored")
	g.Expect(w.Stats().MirrorSkipped).To(BeEquivalentTo(1))

	// A change to a value too large: pushed, and the key leaves the mirror.
	g.Eventually(remote.watchCount).Should(Equal(1))
	bigWeb := &pod.Pod{Name: "web", Namespace: "default", IpAddress: "10.1.1.5",
		Annotations: map[string]string{"last-applied": strings.Repeat("y", kvdb.MaxValueLen)}}
	g.Expect(remote.injectLatest(kvdb.WatchEvent{Type: kvdb.EventPut, Key: pod.Key("web", "default"),
		Value: encode(t, bigWeb), Revision: 1 << 40})).To(Succeed())
	g.Expect(loop.nthChange(g, 1).NewValue).To(equalProto(bigWeb))
	delete(want, pod.Key("web", "default"))
	g.Expect(mirrorContent(g, local)).To(Equal(want))
	g.Expect(w.Stats().MirrorSkipped).To(BeEquivalentTo(2))
}

func TestChangesCarryThePreviousValue(t *testing.T) {
	g := NewWithT(t)
	_, remote := startEtcd(t)
	local := tempBolt(t)
	loop := &fakeLoop{}
	w := startWatcher(t, dbwatcher.Config{Remote: remote, Local: local, Loop: loop})
	g.Expect(loop.nthResync(g, 1).KubeState.Len()).To(BeZero())
	key := node.Key("a")

	put(t, remote, key, nodeA)
	c := loop.nthChange(g, 1)
	g.Expect(c.Key).To(Equal(key))
	g.Expect(c.Resource).To(Equal("node"))
	g.Expect(c.PrevValue).To(BeNil())
	g.Expect(c.NewValue).To(equalProto(nodeA))
	g.Expect(mirrorContent(g, local)).To(HaveKeyWithValue(key, string(encode(t, nodeA))))

	put(t, remote, key, nodeA) // same value: no event
	put(t, remote, key, nodeA2)
	c = loop.nthChange(g, 2)
	g.Expect(c.PrevValue).To(equalProto(nodeA))
	g.Expect(c.NewValue).To(equalProto(nodeA2))

	del(t, remote, key)
	c = loop.nthChange(g, 3)
	g.Expect(c.PrevValue).To(equalProto(nodeA2))
	g.Expect(c.NewValue).To(BeNil())
	g.Expect(c.Direction()).To(Equal(api.Reverse))
	g.Expect(mirrorContent(g, local)).NotTo(HaveKey(key))

	g.Consistently(func() int { return len(loop.changes()) }).WithTimeout(waitShort).Should(Equal(3),
		"the equal value made no event")
	g.Expect(w.Stats().Changes).To(BeEquivalentTo(3))
}

func TestBadValuesAreSkippedAndCounted(t *testing.T) {
	g := NewWithT(t)
	_, remote := startEtcd(t)
	local := tempBolt(t)
	loop := &fakeLoop{}
	w := startWatcher(t, dbwatcher.Config{Remote: remote, Local: local, Loop: loop})
	loop.nthResync(g, 1)

	put(t, remote, "no-such-resource/x", "{}")
	put(t, remote, node.Key("new"), "not json")
	put(t, remote, node.Key("b"), nodeB)
	c := loop.nthChange(g, 1)
	g.Expect(c.Key).To(Equal(node.Key("b")), "the skipped keys made no event")
	g.Expect(w.Stats().DecodeErrors).To(BeEquivalentTo(2))

	// A known key whose value stops decoding keeps its last good value:
	// no event (a delete would release a running pod's address), the
	// mirror unchanged.
	put(t, remote, node.Key("b"), "{broken")
	g.Eventually(func() int64 { return w.Stats().DecodeErrors }).Should(BeEquivalentTo(3))
	g.Expect(mirrorContent(g, local)).To(Equal(map[string]string{node.Key("b"): string(encode(t, nodeB))}))

	del(t, remote, "no-such-resource/x")
	del(t, remote, node.Key("new"))
	put(t, remote, node.Key("b"), nodeB2)
	c = loop.nthChange(g, 2)
	g.Expect(c.PrevValue).To(equalProto(nodeB), "neither the bad value nor deleting unknown keys made an event")
	g.Expect(c.NewValue).To(equalProto(nodeB2))
	g.Expect(loop.changes()).To(HaveLen(2))
	g.Expect(w.Stats().DecodeErrors).To(BeEquivalentTo(3), "deletes are not decode errors")
}

// One bad value is never a delete (a pod key rewritten with garbage, or
// with JSON of a wrong type, released the pod's address at once): the
// watch keeps the last good value, and so does the next remote resync,
// after a restart too, from the mirror.
func TestABadValueKeepsTheLastGoodValue(t *testing.T) {
	g := NewWithT(t)
	_, remote := startEtcd(t)
	local := tempBolt(t)
	loop := &fakeLoop{}
	badPods := make(chan string, 8)
	w := startWatcher(t, dbwatcher.Config{Remote: remote, Local: local, Loop: loop,
		OnBadValue: func(resource string) { badPods <- resource }})
	loop.nthResync(g, 1)

	key := pod.Key("web", "default")
	put(t, remote, key, podWeb)
	g.Expect(loop.nthChange(g, 1).NewValue).To(equalProto(podWeb))
	for i, bad := range []string{"garbage{{", `{"name": 7}`} {
		put(t, remote, key, bad)
		g.Eventually(func() int64 { return w.Stats().DecodeErrors }).Should(BeEquivalentTo(i + 1))
	}
	g.Expect(loop.changes()).To(HaveLen(1), "a bad value made no event")
	g.Expect([]string{<-badPods, <-badPods}).To(Equal([]string{"pod", "pod"}), "each bad value is reported with its resource")
	g.Expect(mirrorContent(g, local)).To(HaveKeyWithValue(key, string(encode(t, podWeb))))

	// A new watcher on the same local store (the agent restarted) lists
	// the bad value: the mirror's last good value stands.
	w.Stop()
	loop2 := &fakeLoop{}
	w2 := startWatcher(t, dbwatcher.Config{Remote: remote, Local: local, Loop: loop2})
	first := loop2.nthResync(g, 1)
	expectValue(g, first.KubeState, "pod", key, podWeb)
	g.Expect(mirrorContent(g, local)).To(HaveKeyWithValue(key, string(encode(t, podWeb))))
	g.Expect(w2.Stats().DecodeErrors).To(BeEquivalentTo(1))

	// A key whose value never decoded is left out.
	w2.Stop()
	put(t, remote, pod.Key("never", "default"), "garbage{{")
	loop3 := &fakeLoop{}
	startWatcher(t, dbwatcher.Config{Remote: remote, Local: local, Loop: loop3})
	third := loop3.nthResync(g, 1)
	g.Expect(third.KubeState["pod"]).To(HaveLen(1))
	expectValue(g, third.KubeState, "pod", key, podWeb)
}

func TestTransactionKeysShareARevision(t *testing.T) {
	g := NewWithT(t)
	_, remote := startEtcd(t)
	loop := &fakeLoop{}
	w := startWatcher(t, dbwatcher.Config{Remote: remote, Loop: loop})
	loop.nthResync(g, 1)

	ok, err := remote.Txn(t.Context(), nil, []kvdb.Op{
		kvdb.PutOp(codec.KSRPrefix+node.Key("a"), encode(t, nodeA)),
		kvdb.PutOp(codec.KSRPrefix+node.Key("b"), encode(t, nodeB)),
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	loop.nthChange(g, 2)
	g.Expect([]string{loop.changes()[0].Key, loop.changes()[1].Key}).To(
		ConsistOf(node.Key("a"), node.Key("b")), "both ops of one revision are delivered")
	g.Expect(w.Stats().DroppedStale).To(BeZero())
}

func TestStaleEventsAreDropped(t *testing.T) {
	g := NewWithT(t)
	_, etcdPlugin := startEtcd(t)
	remote := &breakableStore{Store: etcdPlugin}
	put(t, etcdPlugin, node.Key("a"), nodeA)
	loop := &fakeLoop{}
	w := startWatcher(t, dbwatcher.Config{Remote: remote, Loop: loop})
	loop.nthResync(g, 1)
	g.Eventually(remote.watchCount).Should(Equal(1))

	put(t, etcdPlugin, node.Key("b"), nodeB)
	g.Expect(loop.nthChange(g, 1).Key).To(Equal(node.Key("b")))
	kv, _, err := etcdPlugin.Get(t.Context(), codec.KSRPrefix+node.Key("b"))
	g.Expect(err).NotTo(HaveOccurred())

	replay := []kvdb.WatchEvent{
		// Already in the snapshot.
		{Type: kvdb.EventPut, Key: node.Key("a"), Value: encode(t, nodeA2), Revision: 1},
		// The same key at the same revision: a duplicate.
		{Type: kvdb.EventDelete, Key: node.Key("b"), Revision: kv.Revision},
		// Older than the last processed revision.
		{Type: kvdb.EventPut, Key: node.Key("c"), Value: encode(t, nodeB), Revision: kv.Revision - 1},
	}
	for _, ev := range replay {
		g.Expect(remote.injectLatest(ev)).To(Succeed())
	}
	g.Eventually(func() int64 { return w.Stats().DroppedStale }).Should(BeEquivalentTo(len(replay)))

	// Another key at the last revision is part of the same transaction.
	g.Expect(remote.injectLatest(kvdb.WatchEvent{Type: kvdb.EventPut, Key: node.Key("c"),
		Value: encode(t, nodeB), Revision: kv.Revision})).To(Succeed())
	c := loop.nthChange(g, 2)
	g.Expect(c.Key).To(Equal(node.Key("c")))
	g.Expect(w.Stats().DroppedStale).To(BeEquivalentTo(len(replay)))
}

func TestBrokenWatchResyncs(t *testing.T) {
	g := NewWithT(t)
	_, etcdPlugin := startEtcd(t)
	remote := &breakableStore{Store: etcdPlugin}
	loop := &fakeLoop{}
	w := startWatcher(t, dbwatcher.Config{Remote: remote, Loop: loop})
	loop.nthResync(g, 1)
	g.Eventually(remote.watchCount).Should(Equal(1))

	put(t, etcdPlugin, node.Key("a"), nodeA)
	loop.nthChange(g, 1)

	remote.breakAll()
	second := loop.nthResync(g, 2)
	g.Expect(second.Local).To(BeFalse())
	expectValue(g, second.KubeState, "node", node.Key("a"), nodeA)
	g.Eventually(remote.watchCount).Should(Equal(2), "watching again")
	g.Expect(w.Stats().RemoteResyncs).To(BeEquivalentTo(2))

	put(t, etcdPlugin, node.Key("a"), nodeA2)
	c := loop.nthChange(g, 2)
	g.Expect(c.PrevValue).To(equalProto(nodeA))
	g.Expect(c.NewValue).To(equalProto(nodeA2))
}

func TestRequestResync(t *testing.T) {
	g := NewWithT(t)
	_, remote := startEtcd(t)
	loop := &fakeLoop{}
	w := startWatcher(t, dbwatcher.Config{Remote: remote, Loop: loop})
	loop.nthResync(g, 1)
	put(t, remote, node.Key("a"), nodeA)
	put(t, remote, pod.Key("web", "default"), podWeb)
	loop.nthChange(g, 2)

	w.RequestResync()
	second := loop.nthResync(g, 2)
	g.Expect(second.Local).To(BeFalse())
	g.Expect(second.KubeState.Len()).To(Equal(2))
	expectValue(g, second.KubeState, "node", node.Key("a"), nodeA)
	expectValue(g, second.KubeState, "pod", pod.Key("web", "default"), podWeb)

	// Requests made while a resync is being pushed coalesce into one more
	// resync: hold the watcher inside the push of the third, request five
	// more, release it.
	release := loop.holdPushes()
	pushed := loop.pushCount()
	w.RequestResync()
	g.Eventually(loop.pushCount).WithTimeout(waitLong).Should(Equal(pushed + 1))
	for range 5 {
		w.RequestResync()
	}
	release()
	g.Eventually(func() int { return len(loop.resyncs()) }).WithTimeout(waitLong).Should(Equal(4))
	g.Consistently(func() int { return len(loop.resyncs()) }).WithTimeout(waitShort).Should(Equal(4))

	// After the resyncs, changes continue with the right previous value.
	put(t, remote, node.Key("a"), nodeA2)
	c := loop.nthChange(g, 3)
	g.Expect(c.PrevValue).To(equalProto(nodeA))
}

func TestEtcdRestartResyncs(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	rep := &fakeReporter{}
	remote := startEtcdPlugin(t, etcdConfig(srv.Endpoint()), rep)
	put(t, remote, node.Key("a"), nodeA)
	loop := &fakeLoop{}
	w := startWatcher(t, dbwatcher.Config{Remote: remote, Loop: loop})
	loop.nthResync(g, 1)

	// Stopping a server that has a watch open takes etcd's request timeout
	// (about 5s): its gRPC graceful stop waits for the stream.
	srv.Stop()
	g.Eventually(rep.state).WithTimeout(waitLong).Should(Equal(health.Error))
	srv.Restart()
	g.Eventually(rep.state).WithTimeout(waitLong).Should(Equal(health.OK))
	second := loop.nthResync(g, 2)
	g.Expect(second.Local).To(BeFalse())
	expectValue(g, second.KubeState, "node", node.Key("a"), nodeA)
	g.Expect(w.Stats().RemoteResyncs).To(BeEquivalentTo(2))

	put(t, remote, node.Key("b"), nodeB)
	c := loop.nthChange(g, 1)
	g.Expect(c.Key).To(Equal(node.Key("b")), "watching again after the restart")
}

func TestChangesWhileCutOffAppearInTheResync(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	direct := startEtcdPlugin(t, etcdConfig(srv.Endpoint()), nil)
	px := startProxy(t, srv.Endpoint())
	rep := &fakeReporter{}
	remote := startEtcdPlugin(t, etcdConfig(px.addr()), rep)
	local := tempBolt(t)
	loop := &fakeLoop{}
	startWatcher(t, dbwatcher.Config{Remote: remote, Local: local, Loop: loop})
	put(t, direct, node.Key("a"), nodeA)
	put(t, direct, node.Key("gone"), nodeB)
	loop.nthResync(g, 1)

	px.setCut(true)
	g.Eventually(rep.state).WithTimeout(waitLong).Should(Equal(health.Error))
	put(t, direct, node.Key("a"), nodeA2)
	put(t, direct, pod.Key("web", "default"), podWeb)
	del(t, direct, node.Key("gone"))
	px.setCut(false)

	second := loop.nthResync(g, 2)
	g.Expect(second.Local).To(BeFalse())
	g.Expect(second.KubeState.Len()).To(Equal(2))
	expectValue(g, second.KubeState, "node", node.Key("a"), nodeA2)
	expectValue(g, second.KubeState, "pod", pod.Key("web", "default"), podWeb)
	g.Eventually(func(g Gomega) map[string]string { return mirrorContent(g, local) }).Should(Equal(map[string]string{
		node.Key("a"):             string(encode(t, nodeA2)),
		pod.Key("web", "default"): string(encode(t, podWeb)),
	}))
}

func TestLocalResyncWhileEtcdIsDown(t *testing.T) {
	g := NewWithT(t)
	boltPath := filepath.Join(t.TempDir(), "bolt.db")

	// An earlier run, with etcd up, fills the mirror.
	func() {
		_, remote := startEtcd(t)
		local, closeLocal := openBolt(t, boltPath)
		defer closeLocal()
		put(t, remote, node.Key("a"), nodeA)
		put(t, remote, vppnode.Key(1), vppNode)
		loop := &fakeLoop{}
		w := startWatcher(t, dbwatcher.Config{Remote: remote, Local: local, Loop: loop})
		defer w.Stop()
		loop.nthResync(g, 1)
	}()

	// Now etcd is down at start-up, and holds other data than the mirror.
	srv := etcdtest.Start(t)
	direct := startEtcdPlugin(t, etcdConfig(srv.Endpoint()), nil)
	put(t, direct, node.Key("b"), nodeB)
	g.Expect(direct.Close()).To(Succeed())
	srv.Stop()
	remote := startEtcdPlugin(t, etcdConfig(srv.Endpoint()), nil)
	local, _ := openBolt(t, boltPath)
	loop := &fakeLoop{}
	w := startWatcher(t, dbwatcher.Config{Remote: remote, Local: local, Loop: loop,
		DelayLocalResync: 200 * time.Millisecond})

	first := loop.nthResync(g, 1)
	g.Expect(first.Local).To(BeTrue())
	g.Expect(first.KubeState).To(HaveLen(len(dbresources.Keywords())))
	g.Expect(first.KubeState.Len()).To(Equal(2))
	expectValue(g, first.KubeState, "node", node.Key("a"), nodeA)
	expectValue(g, first.KubeState, "vppnode", vppnode.Key(1), vppNode)
	g.Consistently(loop.count).WithTimeout(waitShort).Should(Equal(1), "one local resync")

	srv.Restart()
	second := loop.nthResync(g, 2)
	g.Expect(second.Local).To(BeFalse())
	expectValue(g, second.KubeState, "node", node.Key("b"), nodeB)
	g.Expect(second.KubeState.Len()).To(Equal(1))
	g.Expect(mirrorContent(g, local)).To(Equal(map[string]string{node.Key("b"): string(encode(t, nodeB))}),
		"the mirror follows etcd")
	st := w.Stats()
	g.Expect(st.LocalResyncs).To(BeEquivalentTo(1))
	g.Expect(st.RemoteResyncs).To(BeEquivalentTo(1))
}

func TestEmptyMirrorWaitsForEtcd(t *testing.T) {
	g := NewWithT(t)
	port := freePort(t)
	remote := startEtcdPlugin(t, etcdConfig("127.0.0.1:"+itoa(port)), nil)
	loop := &fakeLoop{}
	w := startWatcher(t, dbwatcher.Config{Remote: remote, Local: tempBolt(t), Loop: loop,
		DelayLocalResync: 50 * time.Millisecond})
	w.RequestResync() // waits for the first connection
	g.Consistently(loop.pushCount).WithTimeout(waitShort).Should(BeZero())
	g.Expect(w.Stats().LocalResyncs).To(BeZero())

	etcdtest.Start(t, etcdtest.WithPort(port))
	g.Expect(loop.nthResync(g, 1).Local).To(BeFalse())
	// Disconnect before the server's cleanup, which otherwise waits for
	// the open watch.
	w.Stop()
	g.Expect(remote.Close()).To(Succeed())
}

func TestRefusedPushesAreRetried(t *testing.T) {
	g := NewWithT(t)
	_, remote := startEtcd(t)
	loop := &fakeLoop{}
	loop.refuseNext(1)
	w := startWatcher(t, dbwatcher.Config{Remote: remote, Loop: loop})
	first := loop.nthResync(g, 1)
	g.Expect(first.Local).To(BeFalse())
	g.Expect(loop.pushCount()).To(Equal(2), "one refused, one accepted")
	g.Expect(w.Stats().RemoteResyncs).To(BeEquivalentTo(1))

	// A refused change is caught up by a resync that lists again.
	loop.refuseNext(1)
	put(t, remote, node.Key("a"), nodeA)
	second := loop.nthResync(g, 2)
	expectValue(g, second.KubeState, "node", node.Key("a"), nodeA)
	g.Expect(loop.changes()).To(BeEmpty())

	put(t, remote, node.Key("a"), nodeA2)
	c := loop.nthChange(g, 1)
	g.Expect(c.PrevValue).To(equalProto(nodeA), "the state was rebuilt by the resync")
}

func TestClosedLoopIsNotRetried(t *testing.T) {
	g := NewWithT(t)
	_, remote := startEtcd(t)
	loop := &fakeLoop{refuse: 1, err: api.ErrClosedController}
	w := startWatcher(t, dbwatcher.Config{Remote: remote, Loop: loop})
	g.Eventually(loop.pushCount).Should(Equal(1))
	g.Consistently(loop.pushCount).WithTimeout(waitShort).Should(Equal(1))
	w.RequestResync()
	g.Expect(loop.nthResync(g, 1).Local).To(BeFalse(), "an explicit request tries again")
}

// A watcher waiting for room in a full queue still stops.
func TestStopWhileWaitingForTheLoop(t *testing.T) {
	g := NewWithT(t)
	_, remote := startEtcd(t)
	loop := &fullLoop{waiting: make(chan struct{}, 1)}
	w := startWatcher(t, dbwatcher.Config{Remote: remote, Loop: loop})
	g.Eventually(loop.waiting).WithTimeout(waitLong).Should(Receive(), "the first resync waits for room")
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		w.Stop()
	}()
	g.Eventually(stopped).WithTimeout(waitLong).Should(BeClosed())
	g.Expect(w.Stats().RemoteResyncs).To(BeZero(), "the resync never got in")
}

func TestStop(t *testing.T) {
	g := NewWithT(t)
	_, remote := startEtcd(t)

	loop := &fakeLoop{}
	w, err := dbwatcher.New(dbwatcher.Config{Remote: remote, Loop: loop})
	g.Expect(err).NotTo(HaveOccurred())
	w.Stop() // before Start
	w.Stop()
	w.Start() // after Stop: nothing
	g.Consistently(loop.pushCount).WithTimeout(waitShort).Should(BeZero())

	w = startWatcher(t, dbwatcher.Config{Remote: remote, Loop: loop})
	w.Start() // twice: nothing more
	loop.nthResync(g, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Stop()
	}()
	w.Stop()
	g.Eventually(done).Should(BeClosed(), "concurrent Stops both return")
	put(t, remote, node.Key("a"), nodeA)
	w.RequestResync()
	g.Consistently(loop.pushCount).WithTimeout(waitShort).Should(Equal(1), "nothing after Stop")
}

// Every goroutine started while watchers run (the watchers' own, the etcd
// client's and server's watch streams) is gone after Stop: checked by
// goroutine identity, so goroutines that existed before, or that wind down
// from earlier tests, do not matter.
func TestNoGoroutineLeak(t *testing.T) {
	g := NewWithT(t)
	_, remote := startEtcd(t)
	local := tempBolt(t)
	before := liveGoroutines()

	for i := range 3 {
		loop := &fakeLoop{}
		w, err := dbwatcher.New(dbwatcher.Config{Remote: remote, Local: local, Loop: loop,
			Log: testLogger(t), MirrorPrefix: mirrorPrefix, DelayLocalResync: time.Hour})
		g.Expect(err).NotTo(HaveOccurred())
		w.Start()
		loop.nthResync(g, 1)
		put(t, remote, node.Key("a"), &node.Node{Name: "a", Pod_CIDR: "10.9." + itoa(i) + ".0/24"})
		loop.nthChange(g, 1)
		w.Stop()
	}
	g.Eventually(func() []string { return startedSince(before) }).WithTimeout(waitLong).Should(BeEmpty(),
		"goroutines started by the watchers and left after Stop")
}

// liveGoroutines maps the ID of every live goroutine to its stack, read
// from a full stack dump.
func liveGoroutines() map[string]string {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	out := map[string]string{}
	for _, block := range strings.Split(string(buf), "\n\n") {
		header, _, _ := strings.Cut(block, " [")
		if id, ok := strings.CutPrefix(header, "goroutine "); ok {
			out[id] = block
		}
	}
	return out
}

// startedSince returns the stacks of the live goroutines not in before,
// except the caller's.
func startedSince(before map[string]string) []string {
	var out []string
	for id, stack := range liveGoroutines() {
		if _, old := before[id]; !old && !strings.Contains(stack, "liveGoroutines") {
			out = append(out, stack)
		}
	}
	return out
}

func itoa(i int) string { return strconv.Itoa(i) }
