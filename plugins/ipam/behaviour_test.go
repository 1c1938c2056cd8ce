package ipam_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/infra/kvdb/bolt"
	"github.com/contiv-ipam/agent/infra/rest/resttest"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/controller/controllertest"
	"github.com/contiv-ipam/agent/plugins/ipam"
	"github.com/contiv-ipam/agent/plugins/ksr/model/node"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/nodesync"
)

// openBolt opens a real bolt file at path.
func openBolt(t testing.TB, path string) *bolt.Plugin {
	t.Helper()
	c := bolt.DefaultConfig()
	c.DBPath = path
	b := bolt.NewPlugin(bolt.UseConf(c), bolt.UseDeps(func(d *bolt.Deps) { d.Cfg, d.Log = config.NoFile, quietLog() }))
	if err := b.Init(); err != nil {
		t.Fatal(err)
	}
	return b
}

// bystander is a pod of another node (no address here): a state that
// lacks this node's pods but is not empty, so absence counts (a state
// without any pod is no evidence).
var bystander = &podmodel.Pod{Name: "bystander", Namespace: "elsewhere"}

func kubePods(pods ...*podmodel.Pod) api.KubeStateData {
	ks := api.KubeStateData{"pod": {}}
	for _, p := range pods {
		ks["pod"][podmodel.Key(p.Name, p.Namespace)] = p
	}
	return ks
}

// Bug 1 of spec §2.16: the original computed IPv4 offsets of restored pods
// wrongly and restarted next-fit at the lowest free address (.11 here).
func TestResyncContinuesAfterTheHighestRestoredIPv4Address(t *testing.T) {
	g := NewWithT(t)
	ks := kubePods(
		&podmodel.Pod{Name: "pod1", Namespace: "default", IpAddress: "1.2.128.10"},
		&podmodel.Pod{Name: "pod3", Namespace: "kube-system", IpAddress: "1.2.128.12"},
		&podmodel.Pod{Name: "elsewhere", Namespace: "default", IpAddress: "1.2.128.42"},
		&podmodel.Pod{Name: "no-ip", Namespace: "default"},
	)
	i := mustFixture(t, fixtureOpts{}, ks).ipam
	g.Expect(i.GetPodIP(pod1).String()).To(Equal("1.2.128.10/32"))
	g.Expect(i.GetPodIP(pod3).String()).To(Equal("1.2.128.12/32"))
	g.Expect(i.GetPodIP(podmodel.ID{Name: "elsewhere", Namespace: "default"})).To(BeNil())
	ip, err := i.AllocatePodIP(pod2, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ip.String()).To(Equal("1.2.128.13"))
	ip, err = i.AllocatePodIP(pod4, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ip.String()).To(Equal("1.2.128.11"))
}

func TestResyncRestoresIPv6Pods(t *testing.T) {
	g := NewWithT(t)
	ks := kubePods(&podmodel.Pod{Name: "pod1", Namespace: "default", IpAddress: "fe10:f00d::1a0"})
	i := mustFixture(t, fixtureOpts{yaml: ipv6TestConfig}, ks).ipam
	g.Expect(i.GetPodIP(pod1).String()).To(Equal("fe10:f00d::1a0/128"))
	ip, err := i.AllocatePodIP(pod2, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ip.String()).To(Equal("fe10:f00d::1a1"))
}

// Every resync rebuilds from the store and Kubernetes; an allocation of a
// pod that Kubernetes does not have (yet) survives it while its grace
// period runs.
func TestLaterResyncsKeepAllocationsInTheirGracePeriod(t *testing.T) {
	g := NewWithT(t)
	f := mustFixture(t, fixtureOpts{}, nil)
	ip, err := f.ipam.AllocatePodIP(pod1, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	ks := api.KubeStateData{}
	g.Expect(f.ipam.Resync(&api.DBResync{KubeState: ks}, ks, 2, nil)).To(Succeed())
	g.Expect(f.ipam.GetPodIP(pod1).IP).To(Equal(ip), "a reconnect resync keeps the allocation")
	g.Expect(f.ipam.Resync(&api.HealingResync{Type: api.AfterError}, ks, 3, nil)).To(Succeed())
	g.Expect(f.ipam.GetPodIP(pod1).IP).To(Equal(ip), "so does a healing resync")
}

func TestAllocationsSurviveARestartThroughBolt(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "bolt.db")
	db := openBolt(t, path)
	f := mustFixture(t, fixtureOpts{db: db}, nil)
	a1, err := f.ipam.AllocatePodIP(pod1, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	a2, err := f.ipam.AllocatePodIP(pod2, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(db.Close()).To(Succeed())

	db = openBolt(t, path)
	defer db.Close()
	f = mustFixture(t, fixtureOpts{db: db}, nil)
	g.Expect(f.ipam.GetPodIP(pod1).IP).To(Equal(a1))
	g.Expect(f.ipam.GetPodIP(pod2).IP).To(Equal(a2))
	ip, err := f.ipam.AllocatePodIP(pod3, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ip.String()).To(Equal("1.2.128.12"), "next-fit continues after the restored addresses")

	g.Expect(f.ipam.ReleasePodIP(pod1)).To(Succeed())
	_, found, err := db.Get(context.Background(), ipam.AllocationPrefix+"default/pod1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeFalse(), "a release deletes the record")
}

func TestStoredRecordsAreReconciledWithKubernetes(t *testing.T) {
	g := NewWithT(t)
	db := openBolt(t, filepath.Join(t.TempDir(), "bolt.db"))
	defer db.Close()
	ctx := context.Background()
	put := func(key, value string) { g.Expect(db.Put(ctx, ipam.AllocationPrefix+key, []byte(value))).To(Succeed()) }
	put("default/pod1", "1.2.128.10")       // kept
	put("default/pod2", "1.2.128.10")       // clashes with pod1 from Kubernetes: dropped
	put("default/moved", "9.9.9.9")         // outside the pod subnet: dropped
	put("default/garbage", "not-an-ip")     // unreadable: kept for an operator, ignored
	put("bad-key-without-slash", "1.2.3.4") // unreadable key: ignored
	ks := kubePods(&podmodel.Pod{Name: "pod1", Namespace: "default", IpAddress: "1.2.128.10"},
		&podmodel.Pod{Name: "pod3", Namespace: "kube-system", IpAddress: "1.2.128.11"})
	i := mustFixture(t, fixtureOpts{db: db}, ks).ipam
	g.Expect(i.GetPodIP(pod1).String()).To(Equal("1.2.128.10/32"))
	g.Expect(i.GetPodIP(pod2)).To(BeNil())
	g.Expect(i.GetPodIP(pod3).String()).To(Equal("1.2.128.11/32"))

	kvs, _, err := db.List(ctx, ipam.AllocationPrefix)
	g.Expect(err).NotTo(HaveOccurred())
	got := map[string]string{}
	for _, kv := range kvs {
		got[kv.Key] = string(kv.Value)
	}
	g.Expect(got).To(Equal(map[string]string{
		ipam.AllocationPrefix + "default/pod1":          "1.2.128.10",
		ipam.AllocationPrefix + "kube-system/pod3":      "1.2.128.11",
		ipam.AllocationPrefix + "default/garbage":       "not-an-ip",
		ipam.AllocationPrefix + "bad-key-without-slash": "1.2.3.4",
	}))
}

func TestAnAllocationThatCannotBeStoredIsUndone(t *testing.T) {
	g := NewWithT(t)
	fdb, _ := boltFaults(t)
	fdb.setDecide(func([]kvdb.Op) fault { return failBefore })
	i := mustFixture(t, fixtureOpts{db: fdb}, nil).ipam
	_, err := i.AllocatePodIP(pod1, "", "")
	g.Expect(err).To(MatchError(errInjected))
	g.Expect(err).To(MatchError(ContainSubstring("not stored, allocation undone")))
	g.Expect(i.GetPodIP(pod1)).To(BeNil())
	_, found := i.GetPodFromIP(cidr("1.2.128.10/32").IP)
	g.Expect(found).To(BeFalse())
}

func TestConcurrentAllocationsAreDistinctAndStored(t *testing.T) {
	g := NewWithT(t)
	db := openBolt(t, filepath.Join(t.TempDir(), "bolt.db"))
	defer db.Close()
	i := mustFixture(t, fixtureOpts{db: db, yaml: `
ipamConfig:
  podSubnetCIDR: 10.1.0.0/16
  podSubnetOneNodePrefixLen: 24
  nodeInterconnectCIDR: 192.168.16.0/24
`}, nil).ipam
	const n = 100
	ips := make([]string, n)
	var wg sync.WaitGroup
	for k := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ip, err := i.AllocatePodIP(podmodel.ID{Name: fmt.Sprintf("p%d", k), Namespace: "ns"}, "", "")
			if err == nil {
				ips[k] = ip.String()
			}
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, ip := range ips {
		g.Expect(ip).NotTo(BeEmpty())
		g.Expect(seen).NotTo(HaveKey(ip))
		seen[ip] = true
	}
	kvs, _, err := db.List(context.Background(), ipam.AllocationPrefix)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kvs).To(HaveLen(n))
}

const externalConfig = defaultTestConfig + `
  useExternalIPAM: true
`

func nodeWithCIDR(cidr string) api.KubeStateData {
	return api.KubeStateData{"node": {node.Key(thisNode): &node.Node{Name: thisNode, Pod_CIDR: cidr}}}
}

func TestExternalIPAMUsesTheKubernetesPodCIDR(t *testing.T) {
	g := NewWithT(t)
	i := mustFixture(t, fixtureOpts{yaml: externalConfig}, nodeWithCIDR("1.2.200.0/24")).ipam
	g.Expect(i.PodSubnetThisNode().String()).To(Equal("1.2.200.0/24"))
	g.Expect(i.PodGatewayIP().String()).To(Equal("1.2.200.1"))

	ip, err := i.AllocatePodIP(pod1, "host-local", `{"version":"4","address":"1.2.200.7/24","gateway":"1.2.200.1"}`)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ip.String()).To(Equal("1.2.200.7"))
	g.Expect(i.GetPodIP(pod1).String()).To(Equal("1.2.200.7/32"))
	id, found := i.GetPodFromIP(ip)
	g.Expect(found).To(BeTrue())
	g.Expect(id).To(Equal(pod1))
	_, err = i.AllocatePodIP(pod2, "host-local", `{"address":"1.2.200.7/24"}`)
	g.Expect(err).To(MatchError(ContainSubstring("already held by pod default/pod1")))

	_, err = i.AllocatePodIP(pod2, "host-local", "")
	g.Expect(err).To(MatchError(ContainSubstring("error by unmarshalling external IPAM result")))
	_, err = i.AllocatePodIP(pod2, "host-local", `{"address":"1.2.200.8"}`)
	g.Expect(err).To(MatchError(ContainSubstring(`address "1.2.200.8"`)))
	g.Expect(i.ReleasePodIP(pod1)).To(Succeed())
	g.Expect(i.GetPodIP(pod1)).To(BeNil())
}

// Bug 2 of spec §2.16: the original compared pointers, so every NodeUpdate
// of this node produced a PodCIDRChange.
func TestPodCIDRChangeOnlyWhenTheCIDRMoves(t *testing.T) {
	g := NewWithT(t)
	ks := nodeWithCIDR("1.2.200.0/24")
	f := mustFixture(t, fixtureOpts{yaml: externalConfig}, ks)
	update := func(name, prev, next string) *nodesync.NodeUpdate {
		return &nodesync.NodeUpdate{NodeName: name,
			PrevState: &nodesync.Node{ID: 1, Name: name, PodCIDR: cidr(prev)},
			NewState:  &nodesync.Node{ID: 1, Name: name, PodCIDR: cidr(next)}}
	}
	txn := &controllertest.Txn{OnFollowUp: f.loop.PushEvent} // follow-ups land in f.loop
	same := update(thisNode, "1.2.200.0/24", "1.2.200.0/24")
	g.Expect(f.ipam.HandlesEvent(same)).To(BeTrue())
	_, err := f.ipam.Update(same, txn)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.loop.pushed()).To(BeEmpty())

	other := update("other", "1.2.201.0/24", "1.2.202.0/24")
	g.Expect(f.ipam.HandlesEvent(other)).To(BeFalse())

	moved := update(thisNode, "1.2.200.0/24", "1.2.210.0/24")
	change, err := f.ipam.Update(moved, txn)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(change).To(ContainSubstring("1.2.210.0/24"))
	g.Expect(f.loop.pushed()).To(HaveLen(1))
	ev := f.loop.pushed()[0].(*ipam.PodCIDRChange)
	g.Expect(ev.LocalPodCIDR.String()).To(Equal("1.2.210.0/24"))

	// The upstream resync that follows re-initialises on the new CIDR.
	_, err = f.ipam.AllocatePodIP(pod1, "x", `{"address":"1.2.200.7/24"}`)
	g.Expect(err).NotTo(HaveOccurred())
	ks = nodeWithCIDR("1.2.210.0/24")
	g.Expect(f.ipam.Resync(ev, ks, 2, nil)).To(Succeed())
	g.Expect(f.ipam.PodSubnetThisNode().String()).To(Equal("1.2.210.0/24"))
	g.Expect(f.ipam.GetPodIP(pod1)).To(BeNil(), "allocations outside the new CIDR are gone")
}

func TestNodeUpdatesAreIgnoredWithoutExternalIPAM(t *testing.T) {
	g := NewWithT(t)
	f := mustFixture(t, fixtureOpts{}, nil)
	ev := &nodesync.NodeUpdate{NodeName: thisNode, NewState: &nodesync.Node{ID: 1, PodCIDR: cidr("9.9.9.0/24")}}
	g.Expect(f.ipam.HandlesEvent(ev)).To(BeFalse())
}

func TestPodDeletedFromKubernetesGivesItsAddressBack(t *testing.T) {
	g := NewWithT(t)
	clk := newFakeClock()
	f := mustFixture(t, fixtureOpts{clock: clk, grace: time.Minute}, kubePods(bystander))
	ip, err := f.ipam.AllocatePodIP(pod1, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	pod := &podmodel.Pod{Name: pod1.Name, Namespace: pod1.Namespace, IpAddress: ip.String()}
	put := &api.KubeStateChange{Resource: "pod", Key: podmodel.Key(pod.Name, pod.Namespace), NewValue: pod}
	g.Expect(f.ipam.HandlesEvent(put)).To(BeTrue())
	_, err = f.ipam.Update(put, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.ipam.GetPodIP(pod1)).NotTo(BeNil())
	f.beat(t)

	del := &api.KubeStateChange{Resource: "pod", Key: put.Key, PrevValue: pod}
	change, err := f.ipam.Update(del, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(change).To(ContainSubstring("default/pod1"))
	g.Expect(f.ipam.GetPodIP(pod1)).NotTo(BeNil(), "the delete is the first look")
	clk.Advance(time.Minute)
	g.Eventually(func() *net.IPNet { return f.ipam.GetPodIP(pod1) }).WithTimeout(10*time.Second).Should(BeNil(),
		"still missing a grace period later")
	g.Expect(f.ipam.HandlesEvent(&api.KubeStateChange{Resource: "node"})).To(BeFalse())
}

func TestRESTShowsTheNodeAndItsAllocations(t *testing.T) {
	g := NewWithT(t)
	srv := resttest.New(t)
	conf, err := newContivConf(t, "ipamConfig:\n  nodeInterconnectCIDR: 192.168.16.0/24\n")
	g.Expect(err).NotTo(HaveOccurred())
	ns := &fakeNodeSync{}
	ns.id.Store(5)
	reg := prometheus.NewRegistry()
	i := ipam.NewPlugin(ipam.UseDeps(func(d *ipam.Deps) {
		d.Log, d.ContivConf, d.NodeSync, d.ServiceLabel = quietLog(), conf, ns, fakeLabel{thisNode}
		d.HTTP, d.Metrics = srv.Plugin, fakeMetrics{reg}
	}))
	g.Expect(i.Init()).To(Succeed())
	g.Expect(i.AfterInit()).To(Succeed())
	t.Cleanup(func() { _ = i.Close() })
	status, body := srv.Get(ipam.IPAMPath)
	g.Expect(status).To(Equal(http.StatusServiceUnavailable))
	g.Expect(body).To(ContainSubstring("not initialised"))

	g.Expect(i.Resync(&api.DBResync{}, api.KubeStateData{}, 1, nil)).To(Succeed())
	status, body = srv.Get(ipam.IPAMPath)
	g.Expect(status).To(Equal(http.StatusOK))
	var info map[string]any
	g.Expect(json.Unmarshal([]byte(body), &info)).To(Succeed())
	g.Expect(info).To(HaveKeyWithValue("nodeId", 5.0))
	g.Expect(info).To(HaveKeyWithValue("nodeName", thisNode))
	g.Expect(info).To(HaveKeyWithValue("nodeIP", "192.168.16.5"))
	g.Expect(info).To(HaveKeyWithValue("podSubnetThisNode", "10.1.5.0/24"))
	g.Expect(info).To(HaveKeyWithValue("vppHostNetwork", "172.30.5.0/24"))
	cfg := info["config"].(map[string]any)
	g.Expect(cfg).To(HaveKeyWithValue("podSubnetCIDR", "10.1.0.0/16"))
	g.Expect(cfg).To(HaveKeyWithValue("podSubnetOneNodePrefixLen", 24.0))
	g.Expect(cfg).To(HaveKeyWithValue("nodeInterconnectCIDR", "192.168.16.0/24"))
	g.Expect(cfg).To(HaveKeyWithValue("vxlanCIDR", "192.168.30.0/24"))

	_, body = srv.Get(ipam.AllocationsPath)
	g.Expect(body).To(MatchJSON(`{"Pods": null}`))
	_, err = i.AllocatePodIP(pod3, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = i.AllocatePodIP(pod1, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	_, body = srv.Get(ipam.AllocationsPath)
	g.Expect(withoutAllocationTimes(g, body)).To(MatchJSON(`{"Pods": [
		{"PodID": {"Name": "pod1", "Namespace": "default"}, "MainIP": "10.1.5.3"},
		{"PodID": {"Name": "pod3", "Namespace": "kube-system"}, "MainIP": "10.1.5.2"}]}`))

	_, err = i.AllocatePodIP(podmodel.ID{Name: "bad", Namespace: "x"}, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(testutil.GatherAndCompare(reg, stringsReader(`
# HELP contiv_ipam_pod_ip_pool_size Addresses of this node's pod subnet that can be handed out to pods.
# TYPE contiv_ipam_pod_ip_pool_size gauge
contiv_ipam_pod_ip_pool_size{subnet="10.1.5.0/24"} 252
# HELP contiv_ipam_pod_ips_allocated Pod addresses allocated on this node.
# TYPE contiv_ipam_pod_ips_allocated gauge
contiv_ipam_pod_ips_allocated{subnet="10.1.5.0/24"} 3
`), "contiv_ipam_pod_ip_pool_size", "contiv_ipam_pod_ips_allocated")).To(Succeed())
	g.Expect(testutil.ToFloat64(failures(t, reg))).To(Equal(0.0))
}

// failures reads the failed-allocation counter from reg.
func failures(t *testing.T, reg *prometheus.Registry) prometheus.Collector {
	t.Helper()
	return counterFrom{reg, "contiv_ipam_pod_ip_allocation_failures_total"}
}

// counterFrom is a collector re-exporting one metric family of a registry.
type counterFrom struct {
	reg  *prometheus.Registry
	name string
}

func (c counterFrom) Describe(chan<- *prometheus.Desc) {}
func (c counterFrom) Collect(ch chan<- prometheus.Metric) {
	mfs, _ := c.reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == c.name {
			v := mf.GetMetric()[0].GetCounter().GetValue()
			ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(c.name, "", nil, nil), prometheus.CounterValue, v)
		}
	}
}

// fakeMetrics registers on a test registry.
type fakeMetrics struct{ reg *prometheus.Registry }

func (m fakeMetrics) Registerer() prometheus.Registerer     { return m.reg }
func (m fakeMetrics) Register(c prometheus.Collector) error { return m.reg.Register(c) }

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }

func TestFailedAllocationsAreCounted(t *testing.T) {
	g := NewWithT(t)
	reg := prometheus.NewRegistry()
	conf, err := newContivConf(t, defaultTestConfig)
	g.Expect(err).NotTo(HaveOccurred())
	ns := &fakeNodeSync{}
	ns.id.Store(1)
	i := ipam.NewPlugin(ipam.UseDeps(func(d *ipam.Deps) {
		d.Log, d.ContivConf, d.NodeSync, d.ServiceLabel = quietLog(), conf, ns, fakeLabel{thisNode}
		d.Metrics = fakeMetrics{reg}
	}))
	g.Expect(i.Init()).To(Succeed())
	g.Expect(i.AfterInit()).To(Succeed())
	t.Cleanup(func() { _ = i.Close() })
	g.Expect(i.Resync(&api.DBResync{}, api.KubeStateData{}, 1, nil)).To(Succeed())
	for n := range 5 {
		_, _ = i.AllocatePodIP(podmodel.ID{Name: fmt.Sprint(n), Namespace: "ns"}, "", "")
	}
	g.Expect(testutil.ToFloat64(failures(t, reg))).To(Equal(1.0))
}

func TestRESTWithoutNodeInterconnectAnswers500(t *testing.T) {
	g := NewWithT(t)
	srv := resttest.New(t)
	conf, err := newContivConf(t, "ipamConfig:\n  vxlanCIDR: 192.168.30.0/24\n")
	g.Expect(err).NotTo(HaveOccurred())
	ns := &fakeNodeSync{}
	ns.id.Store(1)
	i := ipam.NewPlugin(ipam.UseDeps(func(d *ipam.Deps) {
		d.Log, d.ContivConf, d.NodeSync, d.ServiceLabel, d.HTTP = quietLog(), conf, ns, fakeLabel{thisNode}, srv.Plugin
	}))
	g.Expect(i.Init()).To(Succeed())
	g.Expect(i.AfterInit()).To(Succeed())
	t.Cleanup(func() { _ = i.Close() })
	g.Expect(i.Resync(&api.DBResync{}, api.KubeStateData{}, 1, nil)).To(Succeed())
	status, body := srv.Get(ipam.IPAMPath)
	g.Expect(status).To(Equal(http.StatusInternalServerError))
	g.Expect(body).To(ContainSubstring("Error getting node IP"))
	_, _, err = i.NodeIPAddress(1)
	g.Expect(err).To(MatchError(ipam.ErrUndefined))
}

// withoutAllocationTimes is an allocations reply without the allocatedAt
// of each allocation (Contiv's shape), after checking each is an RFC 3339
// time.
func withoutAllocationTimes(g Gomega, body string) string {
	var reply struct {
		Pods []map[string]any `json:"Pods"`
	}
	g.Expect(json.Unmarshal([]byte(body), &reply)).To(Succeed(), body)
	for _, p := range reply.Pods {
		at, _ := p["allocatedAt"].(string)
		_, err := time.Parse(time.RFC3339, at)
		g.Expect(err).NotTo(HaveOccurred(), "allocatedAt of %v", p)
		delete(p, "allocatedAt")
	}
	out, err := json.Marshal(reply)
	g.Expect(err).NotTo(HaveOccurred())
	return string(out)
}
