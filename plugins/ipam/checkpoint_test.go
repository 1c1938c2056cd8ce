package ipam_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/ipam"
	"github.com/contiv-ipam/agent/plugins/ipam/checkpoint"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// dumpOf is every allocated address of i with its owner.
func dumpOf(i *ipam.Plugin) map[string]string {
	v4, v6, _ := i.Dump()
	for k, v := range v6 {
		v4[k] = v
	}
	return v4
}

// Export on one node, import on a fresh one: the same allocations, the
// same reservations (still expiring) and allocation times, and then the
// Kubernetes state of the new node's last resync is reconciled.
func TestACheckpointRoundTripGivesTheSameAllocations(t *testing.T) {
	g := NewWithT(t)
	clk := newFakeClock()
	src := mustFixture(t, fixtureOpts{yaml: dualStackConfig, clock: clk, resv: time.Minute, grace: 100 * time.Hour,
		db: openBolt(t, filepath.Join(t.TempDir(), "a.db"))}, nil).ipam
	ev, err := addConfirming(src, pod1, att("c1", "eth0"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(src.ConfirmAttachment(context.Background(), att("c1", "eth0"), ev.Reservation)).To(Succeed())
	_, err = addConfirming(src, pod2, att("c2", "eth0")) // stays reserved
	g.Expect(err).NotTo(HaveOccurred())
	_, _, err = src.AllocateNext("", "router")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = src.AllocatePodIP(pod3, "", "")
	g.Expect(err).NotTo(HaveOccurred())

	d, err := src.ExportCheckpoint()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Version).To(Equal(checkpoint.Version))
	g.Expect(d.Allocations).To(HaveLen(5), "c1, c2, router's IPv4 and IPv6 addresses (one allocation each), pod3")
	g.Expect(d.Node).To(Equal(thisNode))

	ks := kubePods(&podmodel.Pod{Name: "elsewhere", Namespace: "default", IpAddress: "1.2.128.27"})
	f := mustFixture(t, fixtureOpts{yaml: dualStackConfig, clock: clk, resv: time.Minute, grace: 100 * time.Hour,
		db: openBolt(t, filepath.Join(t.TempDir(), "b.db"))}, ks)
	dst := f.ipam
	_, err = dst.ImportCheckpoint(d, false)
	g.Expect(err).To(MatchError(ipam.ErrNotEmpty), "the address learned from Kubernetes is an allocation")
	res, err := dst.ImportCheckpoint(d, true)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Imported).To(Equal(5))
	g.Expect(res.Skipped).To(BeZero())

	want := dumpOf(src)
	want["1.2.128.27"] = "default/elsewhere" // learned from Kubernetes at the resync after the import
	g.Expect(dumpOf(dst)).To(Equal(want))
	back, err := dst.ExportCheckpoint()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(podKeyedTimeless(back.Allocations)).To(ContainElements(podKeyedTimeless(d.Allocations)),
		"same keys, addresses, pools, times and reservations")

	clk.Advance(time.Minute) // the imported reservation of c2 expires
	g.Eventually(func() int { return len(dumpOf(dst)) }).Should(Equal(len(want) - 2))
}

// podKeyedTimeless clears the allocation time of pod-keyed entries: their
// record (the plain address, the v1 form) has no room for it, so it is
// not kept across a store.
func podKeyedTimeless(es []checkpoint.Entry) []checkpoint.Entry {
	out := append([]checkpoint.Entry(nil), es...)
	for i := range out {
		if out[i].Owner == "" && out[i].Network == "" {
			out[i].AllocatedAt = time.Time{}
		}
	}
	return out
}

// An import with replace drops what the node held; entries outside the
// node's pod subnets are skipped and named.
func TestACheckpointImportReplacesAndSkips(t *testing.T) {
	g := NewWithT(t)
	i := mustFixture(t, fixtureOpts{yaml: dualStackConfig, db: openBolt(t, filepath.Join(t.TempDir(), "c.db"))}, nil).ipam
	_, err := addPod(i, pod1, att("old", "eth0"))
	g.Expect(err).NotTo(HaveOccurred())
	d := checkpoint.Data{Version: checkpoint.Version, Allocations: []checkpoint.Entry{
		{Network: "net", ContainerID: "new", IfName: "eth0", Pod: &checkpoint.Pod{Name: "pod2", Namespace: "default"},
			IPs: []string{"1.2.128.25", "fe10:f00d::c"}},
		{Owner: "far", Seq: 1, IPs: []string{"10.9.9.9"}},
	}}
	res, err := i.ImportCheckpoint(d, true)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Imported).To(Equal(1))
	g.Expect(res.Skipped).To(Equal(1))
	g.Expect(res.SkippedReasons[0]).To(ContainSubstring("allocations[1]: ip 10.9.9.9: not in a pod subnet"))
	g.Expect(dumpOf(i)).To(Equal(map[string]string{
		"1.2.128.25": "default/pod2 net/new/eth0", "fe10:f00d::c": "default/pod2 net/new/eth0"}))
}

// Without a local store there is nothing to import into: refused, not a
// silent success.
func TestACheckpointImportWithoutAStoreIsRefused(t *testing.T) {
	g := NewWithT(t)
	i := mustFixture(t, fixtureOpts{}, nil).ipam
	_, err := i.ImportCheckpoint(checkpoint.Data{Version: checkpoint.Version}, true)
	g.Expect(err).To(MatchError(ContainSubstring("in memory only")))
}
