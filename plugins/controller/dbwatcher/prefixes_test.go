package dbwatcher_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/controller/dbresources"
	"github.com/contiv-ipam/agent/plugins/controller/dbwatcher"
	"github.com/contiv-ipam/agent/plugins/ksr/model/node"
	"github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
)

// nodePrefixes are the prefixes of an agent of node "a" in the per-node
// pod layout.
func nodePrefixes(t *testing.T) []string {
	ps, err := dbresources.WatchPrefixes("a", dbresources.PodLayoutNode)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return ps
}

// An agent of node a lists and watches a's pods, the nodes and the rest,
// never another node's pods nor the cluster layout: they reach neither
// the loop nor the mirror.
func TestOnlyTheNodesPodsAreRead(t *testing.T) {
	g := NewWithT(t)
	_, remote := startEtcd(t)
	local := tempBolt(t)
	put(t, remote, node.Key("a"), nodeA)
	put(t, remote, vppnode.Key(1), vppNode)
	put(t, remote, pod.NodeKey("a", "web", "default"), podWeb)
	put(t, remote, pod.NodeKey("ab", "other", "default"), podWeb) // "a" is a prefix of "ab"
	put(t, remote, pod.NodeKey("b", "far", "default"), podWeb)
	put(t, remote, pod.Key("web", "default"), podWeb) // the cluster layout
	put(t, remote, "k8s/nodeconfig/ab", "{}")         // another node's, under a's exact key
	put(t, remote, "k8s/namespace/default", "{}")     // read by no handler

	loop := &fakeLoop{}
	w := startWatcher(t, dbwatcher.Config{Remote: remote, Local: local, Loop: loop, Prefixes: nodePrefixes(t)})
	first := loop.nthResync(g, 1)
	g.Expect(first.KubeState.Len()).To(Equal(3))
	expectValue(g, first.KubeState, "pod", pod.NodeKey("a", "web", "default"), podWeb)
	expectValue(g, first.KubeState, "node", node.Key("a"), nodeA)
	expectValue(g, first.KubeState, "vppnode", vppnode.Key(1), vppNode)
	g.Expect(mirrorContent(g, local)).To(HaveLen(3))
	g.Expect(mirrorContent(g, local)).To(HaveKey(pod.NodeKey("a", "web", "default")))

	put(t, remote, pod.NodeKey("b", "far2", "default"), podWeb)
	put(t, remote, pod.Key("web2", "default"), podWeb)
	put(t, remote, pod.NodeKey("a", "web2", "default"), podWeb)
	put(t, remote, "k8s/nodeconfig/ab", `{"x":1}`)
	put(t, remote, "k8s/nodeconfig/a", "{}")
	put(t, remote, node.Key("b"), nodeB)
	// Three prefixes' changes: each in etcd's order, not with each other.
	changes := map[string]string{}
	for i := 1; i <= 3; i++ {
		c := loop.nthChange(g, i)
		changes[c.Key] = c.Resource
	}
	g.Expect(changes).To(Equal(map[string]string{pod.NodeKey("a", "web2", "default"): pod.Keyword,
		node.Key("b"): "node", "k8s/nodeconfig/a": "nodeconfig"}),
		"the other nodes' pods and the cluster layout are not watched; an exact key: its own, not a longer one")
	g.Consistently(loop.count).WithTimeout(waitShort).Should(Equal(4))
	g.Expect(w.Stats().DecodeErrors).To(BeZero())
	g.Expect(mirrorContent(g, local)).To(HaveLen(6))
}

// One prefix's watch breaking lists every prefix again (one state) and
// watches them all again; changes of every prefix flow after it, none
// twice.
func TestOneBrokenWatchResyncsEveryPrefix(t *testing.T) {
	g := NewWithT(t)
	_, etcdPlugin := startEtcd(t)
	remote := &breakableStore{Store: etcdPlugin}
	loop := &fakeLoop{}
	prefixes := nodePrefixes(t)
	w := startWatcher(t, dbwatcher.Config{Remote: remote, Loop: loop, Prefixes: prefixes})
	loop.nthResync(g, 1)
	g.Eventually(remote.watchCount).Should(Equal(len(prefixes)))

	put(t, etcdPlugin, pod.NodeKey("a", "web", "default"), podWeb)
	loop.nthChange(g, 1)
	remote.breakPrefix(pod.NodePrefix("a"))
	second := loop.nthResync(g, 2)
	expectValue(g, second.KubeState, "pod", pod.NodeKey("a", "web", "default"), podWeb)
	g.Eventually(remote.watchCount).Should(Equal(2 * len(prefixes)))

	put(t, etcdPlugin, node.Key("a"), nodeA)
	put(t, etcdPlugin, pod.NodeKey("a", "web", "default"), podWeb2)
	// The two prefixes' changes, in either order (they are not ordered
	// with each other).
	c, other := loop.nthChange(g, 2), loop.nthChange(g, 3)
	if c.Key != pod.NodeKey("a", "web", "default") {
		c, other = other, c
	}
	g.Expect(other.Key).To(Equal(node.Key("a")))
	g.Expect(c.Key).To(Equal(pod.NodeKey("a", "web", "default")))
	g.Expect(c.PrevValue).To(equalProto(podWeb))
	g.Expect(c.NewValue).To(equalProto(podWeb2))
	g.Consistently(loop.count).WithTimeout(waitShort).Should(Equal(5))
	g.Expect(w.Stats().RemoteResyncs).To(BeEquivalentTo(2))
}

// Overlapping prefixes would read a key twice: New refuses them, naming
// both.
func TestOverlappingPrefixesAreRefused(t *testing.T) {
	_, remote := startEtcd(t)
	_, err := dbwatcher.New(dbwatcher.Config{Remote: remote, Loop: &fakeLoop{}, Prefixes: []string{"k8s/", "k8s/pod/"}})
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring(`field Prefixes: "k8s/" covers "k8s/pod/"`)))
}

var podWeb2 = &pod.Pod{Name: "web", Namespace: "default", IpAddress: "10.1.1.6"}
