package ipam_test

import (
	"context"
	"encoding/json"
	"math"
	"net"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/engine/ipalloc"
	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ipam"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// att is the attachment of container cid on network "net" with ifname.
func att(cid, ifname string) podmanager.AttachmentKey {
	return podmanager.AttachmentKey{Network: "net", ContainerID: cid, IfName: ifname}
}

// addPod runs an AddPod through IPAM's handler and waits for its durable
// outcome, as podmanager does.
func addPod(i *ipam.Plugin, pod podmodel.ID, key podmanager.AttachmentKey) (*podmanager.AddPod, error) {
	ev := podmanager.NewAddPod()
	ev.Pod, ev.Key, ev.NetworkNamespace = pod, key, "/var/run/netns/"+key.ContainerID
	if _, err := i.Update(ev, nil); err != nil {
		return ev, err
	}
	return ev, ev.Wait(context.Background())
}

// addr is the address AddPod answered.
func addr(ev *podmanager.AddPod) string {
	if len(ev.Interfaces) != 1 || len(ev.Interfaces[0].IPAddresses) != 1 {
		return ""
	}
	return ev.Interfaces[0].IPAddresses[0].Address.Addr().String()
}

func mustAdd(g Gomega, i *ipam.Plugin, pod podmodel.ID, key podmanager.AttachmentKey) string {
	ev, err := addPod(i, pod, key)
	g.Expect(err).NotTo(HaveOccurred())
	return addr(ev)
}

// deletePod runs a DeletePod through IPAM's handler and waits for it.
func deletePod(i *ipam.Plugin, pod podmodel.ID, key podmanager.AttachmentKey) (string, error) {
	ev := podmanager.NewDeletePod()
	ev.Pod, ev.Key = pod, key
	change, err := i.Update(ev, nil)
	if err != nil {
		return change, err
	}
	return change, ev.Wait(context.Background())
}

// gcPods runs a GCPods through IPAM's handler and waits for it.
func gcPods(i *ipam.Plugin, network string, valid ...podmanager.AttachmentKey) error {
	ev := podmanager.NewGCPods()
	ev.Network, ev.Valid = network, valid
	if _, err := i.Update(ev, nil); err != nil {
		return err
	}
	return ev.Wait(context.Background())
}

// attIP is the address the attachment holds ("" when none).
func attIP(g Gomega, i *ipam.Plugin, key podmanager.AttachmentKey) string {
	pfxs, found, err := i.AttachmentIPs(key)
	g.Expect(err).NotTo(HaveOccurred())
	if !found {
		return ""
	}
	return pfxs[0].String()
}

func TestAddPodRepliesWithThePodSubnetPrefixGatewayAndDefaultRoute(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, addr, gw, route string
	}{
		{"IPv4", defaultTestConfig, "1.2.128.10/29", "1.2.128.9", "0.0.0.0/0"},
		{"IPv6", ipv6TestConfig, "fe10:f00d::102/120", "fe10:f00d::101", "::/0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			f := mustFixture(t, fixtureOpts{yaml: tc.yaml}, nil)
			ev, err := addPod(f.ipam, pod1, att("c1", "eth0"))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ev.Interfaces).To(Equal([]podmanager.PodInterface{{Name: "eth0", Sandbox: "/var/run/netns/c1",
				IPAddresses: []podmanager.IPWithGateway{{Address: netip.MustParsePrefix(tc.addr), Gateway: netip.MustParseAddr(tc.gw)}}}}))
			g.Expect(ev.Routes).To(Equal([]podmanager.Route{{Dst: netip.MustParsePrefix(tc.route), Gw: netip.MustParseAddr(tc.gw)}}))
			g.Expect(attIP(g, f.ipam, att("c1", "eth0"))).To(Equal(tc.addr))
		})
	}
}

// The allocations reply says when each allocation was made (the keeper's
// clock, RFC 3339): contiv-netctl pods shows it as the pod's age.
func TestAllocationsSayWhenTheyWereMade(t *testing.T) {
	g := NewWithT(t)
	clk := newFakeClock()
	f := mustFixture(t, fixtureOpts{clock: clk}, nil)
	mustAdd(g, f.ipam, pod1, att("c1", "eth0"))
	first := clk.Now()
	clk.Advance(90 * time.Second)
	mustAdd(g, f.ipam, pod2, att("c2", "eth0"))
	pods := ipam.AllocationsOf(f.ipam).Pods
	g.Expect(pods).To(HaveLen(2))
	g.Expect(pods[0].AllocatedAt).To(Equal(first.UTC().Format(time.RFC3339)))
	g.Expect(pods[1].AllocatedAt).To(Equal(first.Add(90 * time.Second).UTC().Format(time.RFC3339)))
}

func TestARepeatedAddReturnsTheSameAddress(t *testing.T) {
	g := NewWithT(t)
	db := openBolt(t, filepath.Join(t.TempDir(), "bolt.db"))
	defer db.Close()
	f := mustFixture(t, fixtureOpts{db: db}, nil)
	first := mustAdd(g, f.ipam, pod1, att("c1", "eth0"))
	g.Expect(mustAdd(g, f.ipam, pod1, att("c1", "eth0"))).To(Equal(first))
	g.Expect(ipam.AllocationsOf(f.ipam).Pods).To(HaveLen(1))
	kv, found, err := db.Get(context.Background(), ipam.AttachmentPrefix+"net/c1/eth0")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue())
	g.Expect(json.Unmarshal(kv.Value, new(map[string]any))).To(Succeed())
	g.Expect(string(kv.Value)).To(And(ContainSubstring(`"ip":"`+first+`"`), ContainSubstring(`"name":"pod1"`),
		ContainSubstring(`"namespace":"default"`), ContainSubstring(`"containerId":"c1"`)))
}

// The first ADD of a pod that holds a pod-keyed allocation (a migrated v1
// record, the pod-ID API, an address learned from Kubernetes) keeps its
// address: the allocation is re-keyed and the pod-keyed record deleted.
func TestAnAddAdoptsThePodKeyedAllocation(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "bolt.db")
	db := openBolt(t, path)
	f := mustFixture(t, fixtureOpts{db: db}, nil)
	ip, err := f.ipam.AllocatePodIP(pod1, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(mustAdd(g, f.ipam, pod1, att("c1", "eth0"))).To(Equal(ip.String()))
	g.Expect(stored(g, db, pod1)).To(BeEmpty(), "the pod-keyed record is deleted")
	pods := ipam.AllocationsOf(f.ipam).Pods
	g.Expect(pods).To(HaveLen(1))
	g.Expect(pods[0].AllocatedAt).NotTo(BeEmpty(), "the adopted allocation keeps its time")
	pods[0].AllocatedAt = ""
	g.Expect(pods).To(ConsistOf(ipam.PodAllocation{
		PodID: ipam.PodName{Name: "pod1", Namespace: "default"}, MainIP: ip.String(), Network: "net", ContainerID: "c1", IfName: "eth0"}))
	f.close(t)
	g.Expect(db.Close()).To(Succeed())

	db = openBolt(t, path)
	defer db.Close()
	f = mustFixture(t, fixtureOpts{db: db}, nil)
	g.Expect(attIP(g, f.ipam, att("c1", "eth0"))).To(Equal(ip.String() + "/29"))
	g.Expect(f.ipam.GetPodIP(pod1).IP).To(Equal(ip))
}

// An adoption whose delete of the pod-keyed record failed leaves two
// records of one pod and one address; the restore keeps the attachment
// and deletes the pod-keyed record, without a conflict.
func TestAnAdoptionLeftoverIsDeletedAtRestore(t *testing.T) {
	g := NewWithT(t)
	db := openBolt(t, filepath.Join(t.TempDir(), "bolt.db"))
	defer db.Close()
	ctx := context.Background()
	g.Expect(db.Put(ctx, podKey(pod1), []byte("1.2.128.11"))).To(Succeed())
	g.Expect(db.Put(ctx, ipam.AttachmentPrefix+"net/c1/eth0",
		[]byte(`{"ip":"1.2.128.11","pod":{"name":"pod1","namespace":"default"},"network":"net","containerId":"c1","ifName":"eth0"}`))).To(Succeed())
	f := mustFixture(t, fixtureOpts{db: db}, nil)
	g.Expect(attIP(g, f.ipam, att("c1", "eth0"))).To(Equal("1.2.128.11/29"))
	g.Expect(stored(g, db, pod1)).To(BeEmpty())
	kvs, _, err := db.List(ctx, ipam.ConflictPrefix)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kvs).To(BeEmpty())
}

// The same pod with another container on the same network and interface
// is Contiv's obsolete pod configuration: the old attachment is released
// with the new allocation, even when podmanager forgot the old one.
// Another interface of the pod is not obsolete.
func TestAnotherContainerOfThePodReleasesTheObsoleteAttachment(t *testing.T) {
	g := NewWithT(t)
	db := openBolt(t, filepath.Join(t.TempDir(), "bolt.db"))
	defer db.Close()
	f := mustFixture(t, fixtureOpts{db: db}, nil)
	old := mustAdd(g, f.ipam, pod1, att("c1", "eth0"))
	eth1 := mustAdd(g, f.ipam, pod1, att("c1", "eth1"))
	other := mustAdd(g, f.ipam, pod2, att("c9", "eth0"))
	next := mustAdd(g, f.ipam, pod1, att("c2", "eth0"))
	g.Expect(next).NotTo(Equal(old))
	g.Expect(attIP(g, f.ipam, att("c1", "eth0"))).To(BeEmpty())
	_, found, err := db.Get(context.Background(), ipam.AttachmentPrefix+"net/c1/eth0")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeFalse(), "the obsolete record is deleted")
	g.Expect(attIP(g, f.ipam, att("c1", "eth1"))).To(Equal(eth1 + "/29"))
	g.Expect(attIP(g, f.ipam, att("c9", "eth0"))).To(Equal(other + "/29"))
	g.Expect(f.ipam.GetPodIP(pod1).IP.String()).To(Equal(next), "eth0 is the pod's address")
}

// Plain containers (ContainerNamespace) are pods of their own: two
// containers never make one obsolete.
func TestPlainContainersAreNeverObsolete(t *testing.T) {
	g := NewWithT(t)
	f := mustFixture(t, fixtureOpts{}, nil)
	c1 := podmodel.ID{Name: "c1", Namespace: podmanager.ContainerNamespace}
	c2 := podmodel.ID{Name: "c2", Namespace: podmanager.ContainerNamespace}
	a1 := mustAdd(g, f.ipam, c1, att("c1", "eth0"))
	a2 := mustAdd(g, f.ipam, c2, att("c2", "eth0"))
	g.Expect(a1).NotTo(Equal(a2))
	g.Expect(attIP(g, f.ipam, att("c1", "eth0"))).To(Equal(a1 + "/29"))
}

func TestDeletePod(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup runs before the DEL of pod1's attachment c1/eth0.
		setup func(g Gomega, i *ipam.Plugin)
		// kept lists what still holds an address after it.
		kept func(g Gomega, i *ipam.Plugin)
	}{
		{"an unknown key releases nothing and succeeds", func(g Gomega, i *ipam.Plugin) {
			mustAdd(g, i, pod2, att("c9", "eth0"))
		}, func(g Gomega, i *ipam.Plugin) {
			g.Expect(attIP(g, i, att("c9", "eth0"))).NotTo(BeEmpty())
		}},
		{"an old container ID never releases the new container's address", func(g Gomega, i *ipam.Plugin) {
			mustAdd(g, i, pod1, att("c1", "eth0"))
			mustAdd(g, i, pod1, att("c2", "eth0"))
		}, func(g Gomega, i *ipam.Plugin) {
			g.Expect(attIP(g, i, att("c2", "eth0"))).NotTo(BeEmpty())
			g.Expect(i.GetPodIP(pod1)).NotTo(BeNil())
		}},
		{"a pod-keyed allocation is never released by a DEL", func(g Gomega, i *ipam.Plugin) {
			_, err := i.AllocatePodIP(pod1, "", "")
			g.Expect(err).NotTo(HaveOccurred())
		}, func(g Gomega, i *ipam.Plugin) {
			g.Expect(i.GetPodIP(pod1)).NotTo(BeNil())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			f := mustFixture(t, fixtureOpts{}, nil)
			tc.setup(g, f.ipam)
			change, err := deletePod(f.ipam, pod1, att("c1", "eth0"))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(change).To(BeEmpty(), "nothing released")
			tc.kept(g, f.ipam)
		})
	}
}

func TestDeletePodReleasesTheAttachmentOnceDurable(t *testing.T) {
	g := NewWithT(t)
	db := openBolt(t, filepath.Join(t.TempDir(), "bolt.db"))
	defer db.Close()
	f := mustFixture(t, fixtureOpts{db: db}, nil)
	a := mustAdd(g, f.ipam, pod1, att("c1", "eth0"))
	change, err := deletePod(f.ipam, pod1, att("c1", "eth0"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(change).To(ContainSubstring(a))
	g.Expect(attIP(g, f.ipam, att("c1", "eth0"))).To(BeEmpty())
	kvs, _, err := db.List(context.Background(), ipam.AttachmentPrefix)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kvs).To(BeEmpty())
}

// GC releases every attachment of the network that is not valid; other
// networks and pod-keyed allocations are untouched.
func TestGCReleasesTheAttachmentsThatAreNotValid(t *testing.T) {
	g := NewWithT(t)
	f := mustFixture(t, fixtureOpts{}, nil)
	mustAdd(g, f.ipam, pod1, att("c1", "eth0"))
	mustAdd(g, f.ipam, pod2, att("c2", "eth0"))
	other := podmanager.AttachmentKey{Network: "other", ContainerID: "c3", IfName: "eth0"}
	mustAdd(g, f.ipam, pod3, other)
	_, err := f.ipam.AllocatePodIP(pod4, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gcPods(f.ipam, "net", att("c1", "eth0"), podmanager.AttachmentKey{Network: "other", ContainerID: "x", IfName: "eth0"})).To(Succeed())
	g.Expect(attIP(g, f.ipam, att("c1", "eth0"))).NotTo(BeEmpty())
	g.Expect(attIP(g, f.ipam, att("c2", "eth0"))).To(BeEmpty())
	g.Expect(attIP(g, f.ipam, other)).NotTo(BeEmpty(), "another network")
	g.Expect(f.ipam.GetPodIP(pod4)).NotTo(BeNil(), "pod-keyed")
}

// Kubernetes deleting a pod releases every allocation of the pod.
func TestAPodDeletedFromKubernetesReleasesAllItsAllocations(t *testing.T) {
	g := NewWithT(t)
	clk := newFakeClock()
	f := mustFixture(t, fixtureOpts{clock: clk, grace: time.Minute},
		kubePods(&podmodel.Pod{Name: pod2.Name, Namespace: pod2.Namespace}))
	mustAdd(g, f.ipam, pod1, att("c1", "eth0"))
	mustAdd(g, f.ipam, pod1, att("c1", "eth1"))
	kept := mustAdd(g, f.ipam, pod2, att("c2", "eth0"))
	f.beat(t)
	pod := &podmodel.Pod{Name: pod1.Name, Namespace: pod1.Namespace}
	_, err := f.ipam.Update(&api.KubeStateChange{Resource: "pod", Key: podmodel.Key(pod.Name, pod.Namespace), PrevValue: pod}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.ipam.GetPodIP(pod1)).NotTo(BeNil(), "a delete is one look: nothing is released yet")
	clk.Advance(time.Minute)
	g.Eventually(func() *net.IPNet { return f.ipam.GetPodIP(pod1) }).WithTimeout(10 * time.Second).Should(BeNil())
	g.Expect(attIP(g, f.ipam, att("c1", "eth1"))).To(BeEmpty())
	g.Expect(f.ipam.GetPodIP(pod2).IP.String()).To(Equal(kept))
}

// A pod absent from Kubernetes past the grace period loses every
// allocation; a plain container is never absent.
func TestPlainContainersAreNeverReconciledWithKubernetes(t *testing.T) {
	g := NewWithT(t)
	clk := newFakeClock()
	f := mustFixture(t, fixtureOpts{clock: clk, grace: time.Minute}, kubePods(bystander))
	ctr := podmodel.ID{Name: "c7", Namespace: podmanager.ContainerNamespace}
	mustAdd(g, f.ipam, ctr, att("c7", "eth0"))
	mustAdd(g, f.ipam, pod1, att("c1", "eth0"))
	mustAdd(g, f.ipam, pod1, att("c1", "eth1"))
	f.beat(t)
	ks := kubePods(bystander)
	g.Expect(f.ipam.Resync(&api.DBResync{KubeState: ks}, ks, 2, nil)).To(Succeed())
	clk.Advance(2 * time.Minute)
	g.Expect(f.ipam.Resync(&api.DBResync{KubeState: ks}, ks, 3, nil)).To(Succeed())
	g.Expect(f.ipam.GetPodIP(pod1)).To(BeNil(), "absent past the grace period: every allocation released")
	g.Expect(attIP(g, f.ipam, att("c7", "eth0"))).NotTo(BeEmpty(), "a plain container is never absent")
}

func TestRevertOfAddPodReleasesTheAttachment(t *testing.T) {
	g := NewWithT(t)
	f := mustFixture(t, fixtureOpts{}, nil)
	ev, err := addPod(f.ipam, pod1, att("c1", "eth0"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.ipam.Revert(ev)).To(Succeed())
	g.Expect(attIP(g, f.ipam, att("c1", "eth0"))).To(BeEmpty())
}

func TestCNIEventErrorsWrapTheSentinelsPodmanagerMaps(t *testing.T) {
	external := `{"version":"4","address":"1.2.200.7/24"}`
	for _, tc := range []struct {
		name    string
		unready bool
		yaml    string
		ks      api.KubeStateData
		key     podmanager.AttachmentKey
		data    string
		fill    int
		want    error
		naming  string
	}{
		{name: "not ready", unready: true, key: att("c1", "eth0"), want: podmanager.ErrTryAgain, naming: "not initialised"},
		{name: "no container ID", key: att("", "eth0"), want: podmanager.ErrBadRequest, naming: "container ID"},
		{name: "no ifname", key: att("c1", ""), want: podmanager.ErrBadRequest, naming: "interface name"},
		{name: "no network", key: podmanager.AttachmentKey{ContainerID: "c", IfName: "eth0"}, want: podmanager.ErrBadRequest, naming: "network"},
		{name: "bad ipamData", yaml: externalConfig, ks: nodeWithCIDR("1.2.200.0/24"), key: att("c1", "eth0"), data: "{", want: podmanager.ErrBadRequest, naming: `ipamData "{"`},
		{name: "exhausted", key: att("c1", "eth0"), fill: 4, want: ipalloc.ErrPoolExhausted, naming: "1.2.128.8/29"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var f *fixture
			var err error
			if tc.unready {
				f, err = build(t, fixtureOpts{yaml: tc.yaml})
			} else {
				f, err = newFixture(t, fixtureOpts{yaml: tc.yaml}, tc.ks)
			}
			g.Expect(err).NotTo(HaveOccurred())
			for k := range tc.fill {
				mustAdd(g, f.ipam, podmodel.ID{Name: "fill" + string(rune('a'+k)), Namespace: "default"}, att("fill"+string(rune('a'+k)), "eth0"))
			}
			ev := podmanager.NewAddPod()
			ev.Pod, ev.Key, ev.IPAMData = pod1, tc.key, tc.data
			if tc.data == "" && tc.yaml == externalConfig {
				ev.IPAMData = external
			}
			_, err = f.ipam.Update(ev, nil)
			g.Expect(err).To(MatchError(tc.want))
			g.Expect(err).To(MatchError(ContainSubstring(tc.naming)))
		})
	}
}

func TestAttachmentIPAndFreeAddresses(t *testing.T) {
	g := NewWithT(t)
	f, err := build(t, fixtureOpts{})
	g.Expect(err).NotTo(HaveOccurred())
	_, _, err = f.ipam.AttachmentIPs(att("c1", "eth0"))
	g.Expect(err).To(MatchError(podmanager.ErrTryAgain))
	_, err = f.ipam.FreeAddresses()
	g.Expect(err).To(MatchError(podmanager.ErrTryAgain))

	ks := api.KubeStateData{}
	g.Expect(f.ipam.Resync(&api.DBResync{KubeState: ks}, ks, 1, nil)).To(Succeed())
	free, err := f.ipam.FreeAddresses()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(free).To(Equal(uint64(4)))
	mustAdd(g, f.ipam, pod1, att("c1", "eth0"))
	free, err = f.ipam.FreeAddresses()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(free).To(Equal(uint64(3)))
	g.Expect(attIP(g, f.ipam, att("c1", "eth0"))).To(Equal("1.2.128.10/29"))
	g.Expect(attIP(g, f.ipam, att("c2", "eth0"))).To(BeEmpty())

	ext := mustFixture(t, fixtureOpts{yaml: externalConfig}, nodeWithCIDR("1.2.200.0/24"))
	free, err = ext.ipam.FreeAddresses()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(free).To(Equal(uint64(math.MaxUint64)))
}

// An external IPAM's address: a repeated ADD is idempotent, and the
// first ADD of a pod whose pod-keyed allocation has that address adopts
// it.
func TestExternalIPAMAttachments(t *testing.T) {
	g := NewWithT(t)
	f := mustFixture(t, fixtureOpts{yaml: externalConfig}, nodeWithCIDR("1.2.200.0/24"))
	data := `{"version":"4","address":"1.2.200.7/24","gateway":"1.2.200.1"}`
	_, err := f.ipam.AllocatePodIP(pod1, "host-local", data)
	g.Expect(err).NotTo(HaveOccurred())
	for range 2 {
		ev := podmanager.NewAddPod()
		ev.Pod, ev.Key, ev.IPAMType, ev.IPAMData = pod1, att("c1", "eth0"), "host-local", data
		_, err = f.ipam.Update(ev, nil)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ev.Wait(context.Background())).To(Succeed())
		g.Expect(addr(ev)).To(Equal("1.2.200.7"))
	}
	g.Expect(ipam.AllocationsOf(f.ipam).Pods).To(HaveLen(1))
	ev := podmanager.NewAddPod()
	ev.Pod, ev.Key, ev.IPAMData = pod2, att("c2", "eth0"), data
	_, err = f.ipam.Update(ev, nil)
	g.Expect(err).To(MatchError(ContainSubstring("already held by attachment net/c1/eth0")))
}

// Records that do not parse are reported and left in place, never a
// panic; the good ones are restored.
func TestBadAttachmentRecordsAreSkipped(t *testing.T) {
	g := NewWithT(t)
	db := openBolt(t, filepath.Join(t.TempDir(), "bolt.db"))
	defer db.Close()
	ctx := context.Background()
	bad := map[string]string{
		ipam.AttachmentPrefix + "net/c1/eth0": "not json",
		ipam.AttachmentPrefix + "net/c2/eth0": `{"ip":"1.2.128.11","pod":{"name":"p","namespace":"d"},"network":"net","containerId":"OTHER","ifName":"eth0"}`,
		ipam.AttachmentPrefix + "net/c3/eth0": `{"ip":"nope","pod":{"name":"p","namespace":"d"},"network":"net","containerId":"c3","ifName":"eth0"}`,
		ipam.AttachmentPrefix + "net/c4/eth0": `{"ip":"1.2.128.12","pod":{"name":"","namespace":"d"},"network":"net","containerId":"c4","ifName":"eth0"}`,
	}
	for k, v := range bad {
		g.Expect(db.Put(ctx, k, []byte(v))).To(Succeed())
	}
	good := ipam.AttachmentPrefix + "net/c5/eth0"
	g.Expect(db.Put(ctx, good, []byte(`{"ip":"1.2.128.13","pod":{"name":"p","namespace":"d"},"network":"net","containerId":"c5","ifName":"eth0"}`))).To(Succeed())
	f := mustFixture(t, fixtureOpts{db: db}, nil)
	g.Expect(ipam.AllocationsOf(f.ipam).Pods).To(ConsistOf(ipam.PodAllocation{
		PodID: ipam.PodName{Name: "p", Namespace: "d"}, MainIP: "1.2.128.13", Network: "net", ContainerID: "c5", IfName: "eth0"}))
	kvs, _, err := db.List(ctx, ipam.AttachmentPrefix)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kvs).To(HaveLen(5), "bad records are left in place")
}

// Escaped key parts: an attachment whose parts contain '/' gets a store
// key of its own and survives a restart.
func TestAttachmentKeysAreEscapedInTheStore(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "bolt.db")
	db := openBolt(t, path)
	f := mustFixture(t, fixtureOpts{db: db}, nil)
	key := podmanager.AttachmentKey{Network: "a/b", ContainerID: "c%1", IfName: "eth 0"}
	a := mustAdd(g, f.ipam, pod1, key)
	_, found, err := db.Get(context.Background(), ipam.AttachmentPrefix+"a%2Fb/c%251/eth%200")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue())
	f.close(t)
	g.Expect(db.Close()).To(Succeed())
	db = openBolt(t, path)
	defer db.Close()
	f = mustFixture(t, fixtureOpts{db: db}, nil)
	g.Expect(attIP(g, f.ipam, key)).To(Equal(a + "/29"))
}

// A store key longer than kvdb.MaxKeyLen is refused before anything is
// decided (it would fail the whole batch).
func TestAnAttachmentKeyTooLongForTheStoreIsRefused(t *testing.T) {
	g := NewWithT(t)
	f := mustFixture(t, fixtureOpts{}, nil)
	long := make([]byte, kvdb.MaxKeyLen)
	for k := range long {
		long[k] = 'x'
	}
	_, err := addPod(f.ipam, pod1, att(string(long), "eth0"))
	g.Expect(err).To(MatchError(podmanager.ErrBadRequest))
	g.Expect(err).To(MatchError(ContainSubstring("more than 4096")))
}

// An adoption whose store fails is undone: the pod keeps its pod-keyed
// allocation (record and address), the key holds nothing.
func TestAFailedAdoptionIsUndone(t *testing.T) {
	g := NewWithT(t)
	fdb, db := boltFaults(t)
	f := mustFixture(t, fixtureOpts{db: fdb}, nil)
	ip, err := f.ipam.AllocatePodIP(pod1, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	fdb.setDecide(func(ops []kvdb.Op) fault {
		if touches(ops, ipam.AttachmentPrefix+"net/c1/eth0") {
			return failBefore
		}
		return pass
	})
	_, err = addPod(f.ipam, pod1, att("c1", "eth0"))
	g.Expect(err).To(MatchError(errInjected))
	g.Expect(err).To(MatchError(ContainSubstring("allocation undone")))
	g.Expect(attIP(g, f.ipam, att("c1", "eth0"))).To(BeEmpty())
	g.Expect(f.ipam.GetPodIP(pod1).IP).To(Equal(ip))
	g.Expect(stored(g, db, pod1)).To(Equal(ip.String()), "the pod-keyed record stays")

	fdb.setDecide(nil)
	g.Expect(mustAdd(g, f.ipam, pod1, att("c1", "eth0"))).To(Equal(ip.String()), "adopted at the next try")
	g.Expect(stored(g, db, pod1)).To(BeEmpty())
}

// GetPodIP of a pod with several attachments and no eth0 is the lowest
// address; GetPodFromIP finds the pod through any of them.
func TestGetPodIPWithoutEth0IsTheLowest(t *testing.T) {
	g := NewWithT(t)
	f := mustFixture(t, fixtureOpts{}, nil)
	first := mustAdd(g, f.ipam, pod1, att("c1", "net1"))
	second := mustAdd(g, f.ipam, pod1, att("c1", "net0"))
	g.Expect(first < second).To(BeTrue(), "next-fit hands out upwards")
	g.Expect(f.ipam.GetPodIP(pod1).IP.String()).To(Equal(first))
	for _, a := range []string{first, second} {
		id, found := f.ipam.GetPodFromIP(netip.MustParseAddr(a).AsSlice())
		g.Expect(found).To(BeTrue())
		g.Expect(id).To(Equal(pod1))
	}
	ip, err := f.ipam.AllocatePodIP(pod1, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ip.String()).To(Equal(first), "the pod-ID API answers the address the pod has")
	g.Expect(f.ipam.ReleasePodIP(pod1)).To(Succeed())
	g.Expect(ipam.AllocationsOf(f.ipam).Pods).To(BeEmpty(), "ReleasePodIP releases every allocation of the pod")
}

// GET /contiv/v1/ipam/allocations: the attachment fields are there for an
// attachment and left out for a pod-keyed allocation.
func TestTheAllocationsJSONNamesTheAttachment(t *testing.T) {
	g := NewWithT(t)
	clk := newFakeClock()
	f := mustFixture(t, fixtureOpts{clock: clk}, nil)
	mustAdd(g, f.ipam, pod1, att("c1", "eth0"))
	_, err := f.ipam.AllocatePodIP(pod2, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	body, err := json.Marshal(ipam.AllocationsOf(f.ipam))
	g.Expect(err).NotTo(HaveOccurred())
	at := clk.Now().UTC().Format(time.RFC3339)
	g.Expect(string(body)).To(Equal(`{"Pods":[` +
		`{"PodID":{"Name":"pod1","Namespace":"default"},"MainIP":"1.2.128.10","network":"net","containerId":"c1","ifName":"eth0","allocatedAt":"` + at + `"},` +
		`{"PodID":{"Name":"pod2","Namespace":"default"},"MainIP":"1.2.128.11","allocatedAt":"` + at + `"}]}`))
}

// An address learned from Kubernetes at a restore (no record: a new store
// file) is pod-keyed; the pod's first ADD adopts it and stores it under
// the attachment.
func TestAnAddAdoptsAnAddressLearnedFromKubernetes(t *testing.T) {
	g := NewWithT(t)
	db := openBolt(t, filepath.Join(t.TempDir(), "bolt.db"))
	defer db.Close()
	ks := kubePods(&podmodel.Pod{Name: pod1.Name, Namespace: pod1.Namespace, IpAddress: "1.2.128.12"})
	f := mustFixture(t, fixtureOpts{db: db}, ks)
	g.Expect(stored(g, db, pod1)).To(Equal("1.2.128.12"), "learned and stored pod-keyed")
	g.Expect(mustAdd(g, f.ipam, pod1, att("c1", "eth0"))).To(Equal("1.2.128.12"))
	g.Expect(stored(g, db, pod1)).To(BeEmpty())
	g.Expect(attIP(g, f.ipam, att("c1", "eth0"))).To(Equal("1.2.128.12/29"))
}
