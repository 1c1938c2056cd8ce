package dbresources

import (
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	"github.com/contiv-ipam/agent/plugins/ksr/model/namespace"
	"github.com/contiv-ipam/agent/plugins/ksr/model/node"
	"github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
)

func TestRegistry(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)

	g.Expect(Keywords()).To(Equal([]string{
		"vppnode", "node", "pod", "nodeconfig", "namespace", "policy", "service", "endpoints",
		"customnetwork", "external-interface", "servicefunctionchain", "custom-ipam", "idalloc", "poolclaim", "poolgrant", "mirror",
	}))
	keywords, prefixes := map[string]bool{}, map[string]bool{}
	for _, r := range All() {
		g.Expect(keywords).NotTo(HaveKey(r.Keyword), "duplicate keyword")
		g.Expect(prefixes).NotTo(HaveKey(r.KeyPrefix), "duplicate prefix")
		keywords[r.Keyword], prefixes[r.KeyPrefix] = true, true
		g.Expect(r.KeyPrefix).To(HaveSuffix("/"), r.Keyword)
		g.Expect(r.KeyPrefix).NotTo(HavePrefix("/"), r.Keyword)
		g.Expect(r.New()).NotTo(BeNil(), r.Keyword)
		g.Expect(r.New()).NotTo(BeIdenticalTo(r.New()), "New returns a fresh value")
	}
	byKw := map[string]Resource{}
	for _, r := range All() {
		byKw[r.Keyword] = r
	}
	g.Expect(byKw["vppnode"].KeyPrefix).To(Equal("allocatedIDs/"))
	g.Expect(byKw["node"].KeyPrefix).To(Equal("k8s/node/"))
	g.Expect(byKw["pod"].KeyPrefix).To(Equal("k8s/pod/"))
	g.Expect(byKw["custom-ipam"].KeyPrefix).To(Equal("custom-ipam/"))
	g.Expect(byKw["vppnode"].New()).To(BeAssignableToTypeOf(&vppnode.VppNode{}))
	g.Expect(byKw["node"].New()).To(BeAssignableToTypeOf(&node.Node{}))
	g.Expect(byKw["pod"].New()).To(BeAssignableToTypeOf(&pod.Pod{}))
	g.Expect(byKw["service"].New()).To(BeAssignableToTypeOf(&structpb.Struct{}))
}

// The registry uses the keywords the model packages export, so handlers
// that compare KubeStateChange.Resource with a model's Keyword agree with
// it; the values themselves are pinned.
func TestModelKeywords(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		keyword   string
		prefix    string
		wantValue string
	}{
		{"vppnode", vppnode.Keyword, vppnode.KeyPrefix, "vppnode"},
		{"node", node.Keyword, node.KeyPrefix, "node"},
		{"pod", pod.Keyword, pod.KeyPrefix, "pod"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(tc.keyword).To(Equal(tc.wantValue))
			g.Expect(Keywords()[i]).To(Equal(tc.keyword), "All lists the models first, in this order")
			r, ok := ByKey(tc.prefix + "x")
			g.Expect(ok).To(BeTrue())
			g.Expect(r.Keyword).To(Equal(tc.keyword))
		})
	}
}

func TestAllIsACopy(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)

	all := All()
	all[0].Keyword = "changed"
	g.Expect(All()[0].Keyword).To(Equal("vppnode"))
}

func TestByKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		key    string
		want   string
		wantOK bool
	}{
		{"vppnode", vppnode.Key(3), "vppnode", true},
		{"node", node.Key("n1"), "node", true},
		{"pod", pod.Key("web-0", "default"), "pod", true},
		{"nodeconfig is not node", "k8s/nodeconfig/n1", "nodeconfig", true},
		{"external-interface", "k8s/external-interface/eth1", "external-interface", true},
		{"idalloc", "idalloc/pool/x", "idalloc", true},
		{"prefix alone", "k8s/node/", "node", true},
		{"prefix without slash", "k8s/node", "", false},
		{"unknown k8s kind", "k8s/secret/s1", "", false},
		{"absolute key", codec.KSRPrefix + node.Key("n1"), "", false},
		{"empty", "", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			r, ok := ByKey(tc.key)
			g.Expect(ok).To(Equal(tc.wantOK))
			g.Expect(r.Keyword).To(Equal(tc.want))
		})
	}
}

func TestByKeyLongestPrefix(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)

	rs := []Resource{
		{Keyword: "k8s", KeyPrefix: "k8s/"},
		{Keyword: "node", KeyPrefix: "k8s/node/"},
		{Keyword: "node-special", KeyPrefix: "k8s/node/special/"},
	}
	for key, want := range map[string]string{
		"k8s/pod/x":           "k8s",
		"k8s/node/n1":         "node",
		"k8s/node/special/n1": "node-special",
	} {
		r, ok := byKey(rs, key)
		g.Expect(ok).To(BeTrue(), key)
		g.Expect(r.Keyword).To(Equal(want), key)
	}
	// Order of the table does not matter.
	r, ok := byKey([]Resource{rs[2], rs[0], rs[1]}, "k8s/node/n1")
	g.Expect(ok).To(BeTrue())
	g.Expect(r.Keyword).To(Equal("node"))
	_, ok = byKey(rs, "other/x")
	g.Expect(ok).To(BeFalse())
}

func TestDecodeModels(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)

	kw, v, err := Decode(node.Key("n1"), []byte(`{"name":"n1","pod_CIDR":"10.1.2.0/24","extra":1}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kw).To(Equal("node"))
	g.Expect(proto.Equal(v, &node.Node{Name: "n1", Pod_CIDR: "10.1.2.0/24"})).To(BeTrue())

	kw, v, err = Decode(vppnode.Key(2), []byte(`{"id":2,"name":"n2","ip_addresses":["192.168.16.2/24"]}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kw).To(Equal("vppnode"))
	g.Expect(proto.Equal(v, &vppnode.VppNode{Id: 2, Name: "n2", IpAddresses: []string{"192.168.16.2/24"}})).To(BeTrue())

	data, err := codec.Marshal(&pod.Pod{Name: "web-0", Namespace: "default", IpAddress: "10.1.2.5"})
	g.Expect(err).NotTo(HaveOccurred())
	kw, v, err = Decode(pod.Key("web-0", "default"), data)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kw).To(Equal("pod"))
	g.Expect(v.(*pod.Pod).GetIpAddress()).To(Equal("10.1.2.5"))
}

func TestDecodeNamespace(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	kw, v, err := Decode("k8s/namespace/team-a", []byte(`{"name":"team-a","labels":{"team":"a"},"annotations":{"contivpp.io/x":"1"}}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kw).To(Equal("namespace"))
	ns := v.(*namespace.Namespace)
	g.Expect(ns.GetName()).To(Equal("team-a"))
	g.Expect(ns.GetLabels()).To(Equal(map[string]string{"team": "a"}))
	g.Expect(ns.GetAnnotations()).To(HaveKeyWithValue("contivpp.io/x", "1"))
}

func TestDecodeStructResource(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)

	data := []byte(`{"name":"default","labels":{"team":"a"},"spec":{"finalizers":["kubernetes"]},"n":2}`)
	kw, v, err := Decode("k8s/service/default", data)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kw).To(Equal("service"))
	s, ok := v.(*structpb.Struct)
	g.Expect(ok).To(BeTrue())
	g.Expect(s.AsMap()).To(Equal(map[string]any{
		"name":   "default",
		"labels": map[string]any{"team": "a"},
		"spec":   map[string]any{"finalizers": []any{"kubernetes"}},
		"n":      2.0,
	}))

	// The same value decoded twice compares equal; a changed one does not.
	_, again, err := Decode("k8s/service/default", data)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(proto.Equal(v, again)).To(BeTrue())
	_, changed, err := Decode("k8s/service/default", []byte(`{"name":"default"}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(proto.Equal(v, changed)).To(BeFalse())
}

func TestDecodeErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		key     string
		data    string
		unknown bool
		want    []string
	}{
		{name: "unknown key", key: "k8s/secret/s1", data: `{}`, unknown: true,
			want: []string{`key of no known resource: "k8s/secret/s1"`}},
		{name: "absolute key", key: codec.KSRPrefix + "k8s/node/n1", data: `{}`, unknown: true,
			want: []string{`"/vnf-agent/contiv-ksr/k8s/node/n1" (keys are relative to "/vnf-agent/contiv-ksr/")`}},
		{name: "bad node value", key: "k8s/node/n1", data: `{"name":5}`,
			want: []string{`decode node key "k8s/node/n1": codec: unmarshal ksr.node.Node`}},
		{name: "struct resource not an object", key: "k8s/service/default/s", data: `"text"`,
			want: []string{`decode service key "k8s/service/default/s"`, "google.protobuf.Struct"}},
		{name: "empty value", key: vppnode.Key(1), data: ``,
			want: []string{`decode vppnode key "allocatedIDs/1"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			kw, v, err := Decode(tc.key, []byte(tc.data))
			g.Expect(err).To(HaveOccurred())
			g.Expect(kw).To(BeEmpty())
			g.Expect(v).To(BeNil())
			if tc.unknown {
				g.Expect(err).To(MatchError(ErrUnknownKey))
			} else {
				g.Expect(err).NotTo(MatchError(ErrUnknownKey))
			}
			for _, w := range tc.want {
				g.Expect(err.Error()).To(ContainSubstring(w))
			}
		})
	}
}

// FuzzDecode: Decode never panics; it returns a keyword and value exactly
// when it returns no error, every error names the key, and the keyword is
// the one ByKey gives.
func FuzzDecode(f *testing.F) {
	f.Add("k8s/node/n1", []byte(`{"name":"n1"}`))
	f.Add("allocatedIDs/1", []byte(`{"id":1}`))
	f.Add("k8s/policy/p", []byte(`{"a":[1,{"b":null}]}`))
	f.Add("nope", []byte(`{}`))
	f.Fuzz(func(t *testing.T, key string, data []byte) {
		kw, v, err := Decode(key, data)
		if err != nil {
			if kw != "" || v != nil {
				t.Fatalf("error %v with keyword %q and value %v", err, kw, v)
			}
			if !strings.Contains(err.Error(), strconv.Quote(key)) {
				t.Fatalf("error %q does not name key %q", err, key)
			}
			return
		}
		r, ok := ByKey(key)
		if !ok || r.Keyword != kw || v == nil {
			t.Fatalf("Decode(%q) = %q, %v; ByKey gives %q, %v", key, kw, v, r.Keyword, ok)
		}
	})
}

// An agent reads its own node's pods alone in the node layout, every
// pod in the cluster layout, and in both what its handlers read: every
// node's records, and its own NodeConfig and pool grant and the marker
// (exact keys); no entry covers another (each key comes from one list
// and one watch).
func TestWatchPrefixes(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	nodeLayout, err := WatchPrefixes("n1", PodLayoutNode)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nodeLayout).To(Equal([]string{"allocatedIDs/", "k8s/node/", "k8s/node-pods/n1/", "k8s/nodeconfig/n1",
		"contiv/poolgrant/n1", "contiv/mirror/status"}))
	clusterLayout, err := WatchPrefixes("n1", PodLayoutCluster)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(clusterLayout).To(ContainElement(pod.KeyPrefix))
	g.Expect(clusterLayout).NotTo(ContainElements(pod.NodeKeyPrefix, pod.NodePrefix("n1")))
	for _, ps := range [][]string{nodeLayout, clusterLayout} {
		for i, a := range ps {
			for j, b := range ps {
				g.Expect(i != j && strings.HasPrefix(a, b)).To(BeFalse(), "%q covers %q", b, a)
			}
			r, ok := ByKey(a)
			g.Expect(ok).To(BeTrue(), "%q is of a known resource", a)
			g.Expect(r.Keyword).To(BeElementOf("vppnode", "node", "pod", "nodeconfig", "poolgrant", "mirror"))
		}
	}
	for _, key := range []string{pod.NodeKey("n1", "web", "default"), pod.Key("web", "default")} {
		r, ok := ByKey(key)
		g.Expect(ok).To(BeTrue(), key)
		g.Expect(r.Keyword).To(Equal(pod.Keyword), key)
	}
	_, err = WatchPrefixes("", PodLayoutNode)
	g.Expect(err).To(MatchError(ContainSubstring(`node name ""`)))
	_, err = WatchPrefixes("a/b", PodLayoutCluster)
	g.Expect(err).To(MatchError(ContainSubstring(`node name "a/b"`)))
	_, err = WatchPrefixes("n1", "nodes")
	g.Expect(err).To(MatchError(`pod layout "nodes": want "node" or "cluster"`))
}
