package ipam_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/contiv-ipam/agent/infra/health"
	"github.com/contiv-ipam/agent/infra/health/healthtest"
	"github.com/contiv-ipam/agent/infra/rest/resttest"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/controller/controllertest"
	"github.com/contiv-ipam/agent/plugins/ipam"
	"github.com/contiv-ipam/agent/plugins/ksr/model/node"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/nodesync"
)

// Bad values in the Kubernetes state never take the node down: they are
// logged, counted and (for an event) recorded in the event history; the
// last good value stays, and without one IPAM waits, unready with the
// reason, until a valid value arrives.

func nodeUpdateTo(cidrText string) *nodesync.NodeUpdate {
	_, n, _ := net.ParseCIDR(cidrText)
	if n == nil {
		n = &net.IPNet{IP: net.IP{1, 2, 3, 4}, Mask: net.CIDRMask(40, 32)} // not a valid subnet
	}
	return &nodesync.NodeUpdate{NodeName: thisNode, NewState: &nodesync.Node{ID: 1, Name: thisNode, PodCIDR: n}}
}

func invalidCount(g Gomega, reg *prometheus.Registry) float64 {
	n, err := testutil.GatherAndCount(reg, "contiv_ipam_invalid_values_total")
	g.Expect(err).NotTo(HaveOccurred())
	if n == 0 {
		return 0
	}
	mfs, err := reg.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	for _, mf := range mfs {
		if mf.GetName() == "contiv_ipam_invalid_values_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

// At start, a pod_CIDR that cannot be this node's pod subnet makes IPAM
// wait (not a fatal error: the agent stays up), unready with the reason;
// a valid value that arrives later initialises it.
func TestAnInvalidPodCIDRAtStartMakesIPAMWait(t *testing.T) {
	for _, bad := range []string{"10.1.9.0/31", "1.2.200.9/32", "1.2.200.0/30", "garbage", "1.2.300.0/24", "fe80::/64"} {
		t.Run(bad, func(t *testing.T) {
			g := NewWithT(t)
			h, reg := &healthtest.Recorder{}, prometheus.NewRegistry()
			f, err := build(t, fixtureOpts{yaml: externalConfig, health: h, metrics: reg})
			g.Expect(err).NotTo(HaveOccurred())
			ks := nodeWithCIDR(bad)
			err = f.ipam.Resync(&api.DBResync{KubeState: ks}, ks, 1, nil)
			g.Expect(err).NotTo(HaveOccurred(), "an invalid value is never fatal")
			g.Expect(f.ipam.PodSubnetThisNode()).To(BeNil())
			_, err = f.ipam.AllocatePodIP(pod1, "x", `{"address":"1.2.200.7/24"}`)
			g.Expect(err).To(MatchError(ContainSubstring("waits for a valid pod CIDR")))
			g.Expect(err).To(MatchError(ContainSubstring(bad)))
			state, reason := h.Last()
			g.Expect(state).To(Equal(health.Init), "unready")
			g.Expect(reason).To(ContainSubstring(bad))
			g.Expect(invalidCount(g, reg)).To(Equal(1.0))

			txn := &controllertest.Txn{OnFollowUp: f.loop.PushEvent}
			_, err = f.ipam.Update(nodeUpdateTo("1.2.200.0/24"), txn)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(f.loop.pushed()).To(HaveLen(1), "a valid value triggers the re-initialisation")
			ks = nodeWithCIDR("1.2.200.0/24")
			g.Expect(f.ipam.Resync(f.loop.pushed()[0], ks, 2, nil)).To(Succeed())
			g.Expect(f.ipam.PodSubnetThisNode().String()).To(Equal("1.2.200.0/24"))
			state, _ = h.Last()
			g.Expect(state).To(Equal(health.OK))
		})
	}
}

// While running, an invalid pod CIDR (an update or a resync that carries
// it) is ignored: the pod subnet and the allocations in use stay.
func TestAnInvalidPodCIDRWhileRunningKeepsTheGoodOne(t *testing.T) {
	g := NewWithT(t)
	h, reg := &healthtest.Recorder{}, prometheus.NewRegistry()
	f, err := build(t, fixtureOpts{yaml: externalConfig, health: h, metrics: reg})
	g.Expect(err).NotTo(HaveOccurred())
	ks := nodeWithCIDR("1.2.200.0/24")
	g.Expect(f.ipam.Resync(&api.DBResync{KubeState: ks}, ks, 1, nil)).To(Succeed())
	_, err = f.ipam.AllocatePodIP(pod1, "x", `{"address":"1.2.200.7/24"}`)
	g.Expect(err).NotTo(HaveOccurred())

	txn := &controllertest.Txn{OnFollowUp: f.loop.PushEvent}
	desc, err := f.ipam.Update(nodeUpdateTo("10.1.9.0/31"), txn)
	g.Expect(err).NotTo(HaveOccurred(), "no error: the event must not schedule a healing resync")
	g.Expect(desc).To(ContainSubstring("ignored"), "recorded in the event history")
	g.Expect(desc).To(ContainSubstring("10.1.9.0/31"))
	g.Expect(desc).To(ContainSubstring("1.2.200.0/24"))
	g.Expect(f.loop.pushed()).To(BeEmpty())

	ks = nodeWithCIDR("10.1.9.0/31")
	g.Expect(f.ipam.Resync(&api.HealingResync{Type: api.AfterError}, ks, 2, nil)).To(Succeed())
	g.Expect(f.ipam.PodSubnetThisNode().String()).To(Equal("1.2.200.0/24"))
	g.Expect(f.ipam.GetPodIP(pod1)).NotTo(BeNil())
	g.Expect(invalidCount(g, reg)).To(Equal(2.0))
	state, _ := h.Last()
	g.Expect(state).To(Equal(health.OK))
}

// Two pods holding one address in the Kubernetes state: the first by key
// wins, every time; the other one gets nothing (and is logged).
func TestTwoPodsWithOneAddressInKubernetesHaveADeterministicWinner(t *testing.T) {
	for range 5 {
		g := NewWithT(t)
		ks := kubePods(&podmodel.Pod{Name: "b", Namespace: "default", IpAddress: "1.2.128.10"},
			&podmodel.Pod{Name: "a", Namespace: "default", IpAddress: "1.2.128.10"})
		i := mustFixture(t, fixtureOpts{}, ks).ipam
		g.Expect(i.GetPodIP(podmodel.ID{Name: "a", Namespace: "default"}).String()).To(Equal("1.2.128.10/32"))
		g.Expect(i.GetPodIP(podmodel.ID{Name: "b", Namespace: "default"})).To(BeNil())
	}
}

// Two stored records of one address: the one Kubernetes confirms wins
// (else the newest); the other is moved under ConflictPrefix, not lost.
func TestAConflictingRecordIsMovedAsideNotDeleted(t *testing.T) {
	g := NewWithT(t)
	db := openBolt(t, filepath.Join(t.TempDir(), "bolt.db"))
	defer db.Close()
	ctx := context.Background()
	g.Expect(db.Put(ctx, ipam.AllocationPrefix+"default/pod1", []byte("1.2.128.10"))).To(Succeed())
	g.Expect(db.Put(ctx, ipam.AllocationPrefix+"default/pod2", []byte("1.2.128.10"))).To(Succeed())
	ks := kubePods(&podmodel.Pod{Name: "pod1", Namespace: "default", IpAddress: "1.2.128.10"},
		&podmodel.Pod{Name: "pod2", Namespace: "default"})
	i := mustFixture(t, fixtureOpts{db: db}, ks).ipam
	g.Expect(i.GetPodIP(pod1).String()).To(Equal("1.2.128.10/32"), "Kubernetes confirms pod1")
	g.Expect(i.GetPodIP(pod2)).To(BeNil())
	kv, found, err := db.Get(ctx, ipam.ConflictPrefix+"default/pod2")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue(), "the losing record is kept for an operator")
	g.Expect(string(kv.Value)).To(ContainSubstring(`"ip":"1.2.128.10"`))
	g.Expect(string(kv.Value)).To(ContainSubstring(`"keptFor":"default/pod1"`))
	_, found, err = db.Get(ctx, ipam.AllocationPrefix+"default/pod2")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeFalse())
}

// A pod whose key and value disagree is skipped; so is the address of a
// pod of this node outside its pod subnet.
func TestInconsistentPodsAreSkipped(t *testing.T) {
	g := NewWithT(t)
	ks := kubePods(&podmodel.Pod{Name: "ok", Namespace: "default", IpAddress: "1.2.128.11"})
	ks["pod"][podmodel.Key("other-name", "default")] = &podmodel.Pod{Name: "liar", Namespace: "default", IpAddress: "1.2.128.10"}
	ks["pod"][podmodel.Key("here", "default")] = &podmodel.Pod{Name: "here", Namespace: "default", IpAddress: "9.9.9.9", HostIpAddress: "192.168.16.1"}
	f, err := build(t, fixtureOpts{})
	g.Expect(err).NotTo(HaveOccurred())
	f.sync.setNodes(nodesync.Nodes{thisNode: {ID: 1, Name: thisNode, MgmtIPAddresses: []net.IP{net.ParseIP("192.168.16.1")}}})
	g.Expect(f.ipam.Resync(&api.DBResync{KubeState: ks}, ks, 1, nil)).To(Succeed())
	g.Expect(f.ipam.GetPodIP(podmodel.ID{Name: "liar", Namespace: "default"})).To(BeNil())
	_, held := f.ipam.GetPodFromIP(net.ParseIP("1.2.128.10"))
	g.Expect(held).To(BeFalse(), "the value of a key that names another pod is not used")
	g.Expect(f.ipam.GetPodIP(podmodel.ID{Name: "ok", Namespace: "default"}).String()).To(Equal("1.2.128.11/32"))
	g.Expect(f.ipam.GetPodIP(podmodel.ID{Name: "here", Namespace: "default"})).To(BeNil())
}

// GET /contiv/v1/ipam/conflicts lists the records moved aside.
func TestRESTListsTheConflicts(t *testing.T) {
	g := NewWithT(t)
	srv := resttest.New(t)
	db := openBolt(t, filepath.Join(t.TempDir(), "bolt.db"))
	defer db.Close()
	ctx := context.Background()
	g.Expect(db.Put(ctx, ipam.AllocationPrefix+"default/pod1", []byte("1.2.128.10"))).To(Succeed())
	g.Expect(db.Put(ctx, ipam.AllocationPrefix+"default/pod2", []byte("1.2.128.10"))).To(Succeed())
	conf, err := newContivConf(t, defaultTestConfig)
	g.Expect(err).NotTo(HaveOccurred())
	ns := &fakeNodeSync{}
	ns.id.Store(1)
	i := ipam.NewPlugin(ipam.UseDeps(func(d *ipam.Deps) {
		d.Log, d.ContivConf, d.NodeSync, d.ServiceLabel = quietLog(), conf, ns, fakeLabel{thisNode}
		d.LocalDB, d.HTTP = db, srv.Plugin
	}))
	g.Expect(i.Init()).To(Succeed())
	g.Expect(i.AfterInit()).To(Succeed())
	t.Cleanup(func() { _ = i.Close() })
	status, body := srv.Get(ipam.ConflictsPath)
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(body).To(MatchJSON(`{"conflicts": []}`))

	ks := kubePods()
	g.Expect(i.Resync(&api.DBResync{KubeState: ks}, ks, 1, nil)).To(Succeed())
	_, body = srv.Get(ipam.ConflictsPath)
	var got ipam.Conflicts
	g.Expect(json.Unmarshal([]byte(body), &got)).To(Succeed())
	g.Expect(got.Conflicts).To(HaveLen(1), "no Kubernetes word: the newer record (pod2) wins")
	g.Expect(got.Conflicts[0].PodID).To(Equal(ipam.PodName{Name: "pod1", Namespace: "default"}))
	g.Expect(got.Conflicts[0].IP).To(Equal("1.2.128.10"))
	g.Expect(got.Conflicts[0].KeptFor).To(Equal("default/pod2"))
}

// With useExternalIPAM and no pod CIDR of this node in the Kubernetes
// state (no node record yet, or one without pod_CIDR), IPAM waits,
// unready and serving no ADD, rather than run on a subnet derived from
// its node ID that may be another node's; the record's arrival
// initialises it, and a later resync without the record keeps the pod
// CIDR in use.
func TestExternalIPAMWaitsForTheNodeRecord(t *testing.T) {
	for name, ks := range map[string]api.KubeStateData{
		"no node record": {},
		"no pod CIDR":    nodeWithCIDR(""),
		"another node's": {"node": {node.Key("other"): &node.Node{Name: "other", Pod_CIDR: "1.2.201.0/24"}}},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			h := &healthtest.Recorder{}
			f, err := build(t, fixtureOpts{yaml: externalConfig, health: h})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(f.ipam.Resync(&api.DBResync{KubeState: ks}, ks, 1, nil)).To(Succeed(), "waiting is not an error")
			g.Expect(f.ipam.PodSubnetThisNode()).To(BeNil())
			_, err = f.ipam.AllocatePodIP(pod1, "x", `{"address":"1.2.200.7/24"}`)
			g.Expect(err).To(MatchError(ContainSubstring("waits for this node's pod CIDR")))
			state, reason := h.Last()
			g.Expect(state).To(Equal(health.Init), "unready")
			g.Expect(reason).To(ContainSubstring(thisNode))

			ks = nodeWithCIDR("1.2.200.0/24")
			g.Expect(f.ipam.Resync(&api.DBResync{KubeState: ks}, ks, 2, nil)).To(Succeed())
			g.Expect(f.ipam.PodSubnetThisNode().String()).To(Equal("1.2.200.0/24"))
			state, _ = h.Last()
			g.Expect(state).To(Equal(health.OK))

			ks = api.KubeStateData{}
			g.Expect(f.ipam.Resync(&api.DBResync{KubeState: ks}, ks, 3, nil)).To(Succeed())
			g.Expect(f.ipam.PodSubnetThisNode().String()).To(Equal("1.2.200.0/24"), "the pod CIDR in use stays")
		})
	}
}
