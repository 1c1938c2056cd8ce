package ipam_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/engine/ipalloc"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/controller/controllertest"
	"github.com/contiv-ipam/agent/plugins/ipam"
	"github.com/contiv-ipam/agent/plugins/ksr/model/node"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/nodesync"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// dualStackConfig: IPv4 primary with 12 pod addresses per node (/28), and
// an IPv6 second family with 4 (/125): the second family runs out first.
const dualStackConfig = `
ipamConfig:
  podSubnetCIDR: 1.2.128.0/17
  podSubnetOneNodePrefixLen: 28
  vppHostSubnetCIDR: 2.3.192.0/18
  vppHostSubnetOneNodePrefixLen: 30
  nodeInterconnectCIDR: 3.4.5.192/26
  vxlanCIDR: 4.5.6.192/26
  dualStack:
    podSubnetCIDR: fe10:f00d::/90
    podSubnetOneNodePrefixLen: 125
    vppHostSubnetCIDR: fe30:f00d::/90
    vppHostSubnetOneNodePrefixLen: 126
    nodeInterconnectCIDR: fe40:f00d::/90
    vxlanCIDR: fe20:f00d::/120
    serviceCIDR: fd00:96::/110
`

// addConfirming is addPod from a client that confirms (contiv-cni).
func addConfirming(i *ipam.Plugin, pod podmodel.ID, key podmanager.AttachmentKey) (*podmanager.AddPod, error) {
	ev := podmanager.NewAddPod()
	ev.Pod, ev.Key, ev.NetworkNamespace, ev.Confirms = pod, key, "/var/run/netns/"+key.ContainerID, true
	if _, err := i.Update(ev, nil); err != nil {
		return ev, err
	}
	return ev, ev.Wait(context.Background())
}

// ips lists the addresses of an AddPod reply.
func ips(ev *podmanager.AddPod) []string {
	var out []string
	for _, iface := range ev.Interfaces {
		for _, ip := range iface.IPAddresses {
			out = append(out, ip.Address.String()+" gw "+ip.Gateway.String())
		}
	}
	for _, r := range ev.Routes {
		out = append(out, r.Dst.String()+" via "+r.Gw.String())
	}
	return out
}

func TestADualStackPodGetsOneAddressPerFamilyAndBothRoutes(t *testing.T) {
	g := NewWithT(t)
	i := mustFixture(t, fixtureOpts{yaml: dualStackConfig}, nil).ipam
	ev, err := addPod(i, pod1, att("c1", "eth0"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ips(ev)).To(Equal([]string{
		"1.2.128.18/28 gw 1.2.128.17", "fe10:f00d::a/125 gw fe10:f00d::9",
		"0.0.0.0/0 via 1.2.128.17", "::/0 via fe10:f00d::9",
	}))
	g.Expect(ev.Reservation).To(BeEmpty(), "a client that does not confirm gets no reservation")
	held, found, err := i.AttachmentIPs(att("c1", "eth0"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue())
	g.Expect(fmt.Sprint(held)).To(Equal("[1.2.128.18/28 fe10:f00d::a/125]"), "CHECK sees both")
	v4, v6, status := i.Dump()
	g.Expect(v4).To(Equal(map[string]string{"1.2.128.18": "default/pod1 net/c1/eth0"}))
	g.Expect(v6).To(Equal(map[string]string{"fe10:f00d::a": "default/pod1 net/c1/eth0"}))
	g.Expect(status).To(ContainSubstring("1.2.128.16/28: 1/12 allocated"))
	g.Expect(status).To(ContainSubstring("fe10:f00d::8/125: 1/4 allocated"))
}

func TestTheFirstFamilyIsRolledBackWhenTheSecondIsExhausted(t *testing.T) {
	g := NewWithT(t)
	i := mustFixture(t, fixtureOpts{yaml: dualStackConfig}, nil).ipam
	for n := range 4 {
		_, err := addPod(i, podmodel.ID{Name: "p" + string(rune('a'+n)), Namespace: "default"}, att("c"+string(rune('a'+n)), "eth0"))
		g.Expect(err).NotTo(HaveOccurred())
	}
	_, err := addPod(i, pod1, att("c-last", "eth0"))
	g.Expect(errors.Is(err, ipalloc.ErrPoolExhausted)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("fe10:f00d::8/125"))
	v4, v6, status := i.Dump()
	g.Expect(v4).To(HaveLen(4), "the IPv4 address of the failed pod was given back")
	g.Expect(v6).To(HaveLen(4))
	g.Expect(status).To(ContainSubstring("1.2.128.16/28: 4/12 allocated"))
	// The rollback left the IPv4 pool as it was, its next-fit cursor
	// included: the address the failed ADD took is the next one.
	next, _, err := i.AllocateNext("ipv4", "router")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(next.IP.String()).To(Equal("1.2.128.22"))
	held, _ := i.IPv4Allocator().Dump()
	g.Expect(held).To(HaveLen(5))
}

func TestADisabledFamilyIsRefused(t *testing.T) {
	g := NewWithT(t)
	i := mustFixture(t, fixtureOpts{}, nil).ipam // IPv4 only
	_, err := i.AllocateNextFamily(ipam.IPv6, "router")
	g.Expect(errors.Is(err, ipam.ErrIPv6Disabled)).To(BeTrue(), "%v", err)
	_, _, err = i.AllocateNext("ipv6", "router")
	g.Expect(errors.Is(err, ipam.ErrIPv6Disabled)).To(BeTrue(), "%v", err)
	err = i.AllocateIPString("fe10:f00d::5", "router")
	g.Expect(errors.Is(err, ipam.ErrIPv6Disabled)).To(BeTrue(), "%v", err)
	v4, v6, err := i.AllocateNext("", "router")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v4.IP.String()).To(Equal("1.2.128.10"))
	g.Expect(v4.CIDRs).To(Equal([]string{"1.2.128.8/29"}))
	g.Expect(v4.GatewayIP).To(Equal("1.2.128.9"))
	g.Expect(v6).To(BeNil())

	i6 := mustFixture(t, fixtureOpts{yaml: ipv6TestConfig}, nil).ipam
	_, err = i6.AllocateNextFamily(ipam.IPv4, "router")
	g.Expect(errors.Is(err, ipam.ErrIPv4Disabled)).To(BeTrue(), "%v", err)
}

func TestAnUnconfirmedReservationExpiresAndAConfirmedOneNever(t *testing.T) {
	g := NewWithT(t)
	clk := newFakeClock()
	i := mustFixture(t, fixtureOpts{yaml: dualStackConfig, clock: clk, resv: time.Minute, grace: 100 * time.Hour}, nil).ipam
	lost, err := addConfirming(i, pod1, att("lost", "eth0"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lost.Reservation).NotTo(BeEmpty())
	kept, err := addConfirming(i, pod2, att("kept", "eth0"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(i.ConfirmAttachment(context.Background(), att("kept", "eth0"), lost.Reservation)).
		To(MatchError(ipam.ErrReservationMismatch), "another attachment's reservation")
	g.Expect(i.ConfirmAttachment(context.Background(), att("kept", "eth0"), kept.Reservation)).To(Succeed())

	clk.Advance(59 * time.Second)
	g.Consistently(func() int { v4, _, _ := i.Dump(); return len(v4) }, "50ms").Should(Equal(2))
	clk.Advance(time.Second)
	g.Eventually(func() map[string]string { v4, _, _ := i.Dump(); return v4 }).
		Should(Equal(map[string]string{"1.2.128.19": "default/pod2 net/kept/eth0"}))
	_, v6, _ := i.Dump()
	g.Expect(v6).To(HaveLen(1), "the expired reservation gave back both families")
	g.Expect(i.ConfirmAttachment(context.Background(), att("lost", "eth0"), lost.Reservation)).
		To(MatchError(ipam.ErrReservationMismatch), "too late")

	clk.Advance(time.Hour)
	g.Consistently(func() int { v4, _, _ := i.Dump(); return len(v4) }, "50ms").Should(Equal(1))
}

func TestARepeatedAddRenewsAnUnconfirmedReservation(t *testing.T) {
	g := NewWithT(t)
	clk := newFakeClock()
	i := mustFixture(t, fixtureOpts{yaml: dualStackConfig, clock: clk, resv: time.Minute}, nil).ipam
	first, err := addConfirming(i, pod1, att("c1", "eth0"))
	g.Expect(err).NotTo(HaveOccurred())
	clk.Advance(30 * time.Second)
	again, err := addConfirming(i, pod1, att("c1", "eth0"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ips(again)).To(Equal(ips(first)))
	g.Expect(again.Reservation).NotTo(Equal(first.Reservation))
	g.Expect(i.ConfirmAttachment(context.Background(), att("c1", "eth0"), first.Reservation)).To(MatchError(ipam.ErrReservationMismatch))
	clk.Advance(45 * time.Second) // past the first deadline, before the second
	g.Consistently(func() int { v4, _, _ := i.Dump(); return len(v4) }, "50ms").Should(Equal(1))
	g.Expect(i.ConfirmAttachment(context.Background(), att("c1", "eth0"), again.Reservation)).To(Succeed())
	confirmedAgain, err := addConfirming(i, pod1, att("c1", "eth0"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(confirmedAgain.Reservation).To(BeEmpty(), "a confirmed allocation is not reserved again")
}

func TestReservationsSurviveARestart(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "ipam.db")
	clk := newFakeClock()
	db := openBolt(t, path)
	f := mustFixture(t, fixtureOpts{yaml: dualStackConfig, clock: clk, resv: time.Minute, db: db}, nil)
	_, err := addConfirming(f.ipam, pod1, att("lost", "eth0"))
	g.Expect(err).NotTo(HaveOccurred())
	kept, err := addConfirming(f.ipam, pod2, att("kept", "eth0"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.ipam.ConfirmAttachment(context.Background(), att("kept", "eth0"), kept.Reservation)).To(Succeed())
	_, _, err = f.ipam.AllocateNextWithExpiration("", "router", 2*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	f.close(t)
	g.Expect(db.Close()).To(Succeed())

	clk.Advance(30 * time.Second)
	db = openBolt(t, path)
	t.Cleanup(func() { _ = db.Close() })
	i := mustFixture(t, fixtureOpts{yaml: dualStackConfig, clock: clk, resv: time.Minute, db: db}, nil).ipam
	v4, v6, status := i.Dump()
	g.Expect(v4).To(HaveLen(3))
	g.Expect(v6).To(HaveLen(3))
	g.Expect(status).To(ContainSubstring("3 reservations awaiting confirmation"), "the ADD's, and one per address of the owner's")
	clk.Advance(30 * time.Second) // the ADD's deadline
	g.Eventually(func() int { v4, _, _ := i.Dump(); return len(v4) }).Should(Equal(2))
	clk.Advance(time.Minute) // the owner's deadline
	g.Eventually(func() map[string]string { v4, _, _ := i.Dump(); return v4 }).
		Should(Equal(map[string]string{"1.2.128.19": "default/pod2 net/kept/eth0"}))
}

func TestTheCiliumAllocationSurface(t *testing.T) {
	g := NewWithT(t)
	clk := newFakeClock()
	i := mustFixture(t, fixtureOpts{yaml: dualStackConfig, clock: clk}, nil).ipam
	v4, v6, err := i.AllocateNext("", "router")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect([]string{v4.IP.String(), v6.IP.String()}).To(Equal([]string{"1.2.128.18", "fe10:f00d::a"}))
	g.Expect(i.AllocateIPString("1.2.128.25", "health")).To(Succeed())
	g.Expect(errors.Is(i.AllocateIPString("1.2.128.25", "other"), ipalloc.ErrTaken)).To(BeTrue())
	err = i.AllocateIPString("1.2.128.17", "other")
	g.Expect(errors.Is(err, ipalloc.ErrReserved)).To(BeTrue(), "the gateway: %v", err)
	g.Expect(errors.Is(i.AllocateIPString("1.2.200.1", "other"), ipalloc.ErrOutOfRange)).To(BeTrue())

	i.BlacklistIP(net.ParseIP("1.2.128.19"), "appliance")
	i.BlacklistIPNet(*cidr("fe10:f00d::b/128"), "appliance")
	g.Expect(errors.Is(i.AllocateIPString("1.2.128.19", "other"), ipam.ErrExcluded)).To(BeTrue())
	a, err := i.AllocateNextFamily(ipam.IPv4, "dns")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a.IP.String()).To(Equal("1.2.128.20"), "next-fit skips the excluded .19")
	b, err := i.AllocateNextFamily(ipam.IPv6, "dns")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.IP.String()).To(Equal("fe10:f00d::c"))

	// Release by owner: both of dns's allocations.
	g.Expect(i.ReleaseIPString("dns")).To(Succeed())
	all4, all6, _ := i.Dump()
	g.Expect(all4).To(Equal(map[string]string{"1.2.128.18": "router", "1.2.128.25": "health"}))
	g.Expect(all6).To(Equal(map[string]string{"fe10:f00d::a": "router"}))
	g.Expect(i.ReleaseIPString("dns")).To(MatchError(ipam.ErrNotAllocated))
	// Release by address: that address only (each address of the router's
	// AllocateNext("") is an allocation of its own, as in Cilium).
	g.Expect(i.ReleaseIP(net.ParseIP("fe10:f00d::a"))).To(Succeed())
	all4, all6, _ = i.Dump()
	g.Expect(all4).To(Equal(map[string]string{"1.2.128.18": "router", "1.2.128.25": "health"}))
	g.Expect(all6).To(BeEmpty())
	g.Expect(i.ReleaseIP(net.ParseIP("fe10:f00d::a"))).To(MatchError(ipam.ErrNotAllocated))
	g.Expect(i.ReleaseIP(net.ParseIP("1.2.128.18"))).To(Succeed())

	// Expiration timers: the UUID must match.
	ip := net.ParseIP("1.2.128.25")
	id, err := i.StartExpirationTimer(ip, time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = i.StartExpirationTimer(ip, time.Minute)
	g.Expect(err).To(MatchError(ipam.ErrTimerExists))
	g.Expect(i.StopExpirationTimer(ip, "not-"+id)).To(MatchError(ipam.ErrReservationMismatch))
	g.Expect(i.StopExpirationTimer(ip, id)).To(Succeed())
	clk.Advance(time.Hour)
	g.Consistently(func() int { m, _, _ := i.Dump(); return len(m) }, "50ms").Should(Equal(1), "a stopped timer never fires")
	id, err = i.StartExpirationTimer(ip, time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(id).NotTo(BeEmpty())
	clk.Advance(time.Minute)
	g.Eventually(func() int { m, _, _ := i.Dump(); return len(m) }).Should(Equal(0), "an unstopped timer fires")

	g.Expect(strings.Split(i.DebugStatus(), "\n")[0]).To(ContainSubstring("1 excluded"))
}

func TestExclusionsFromTheConfig(t *testing.T) {
	g := NewWithT(t)
	yaml := dualStackConfig + `
  excludeIPs:
    - cidr: 1.2.128.18/31
      owner: appliance
    - cidr: fe10:f00d::a
`
	i := mustFixture(t, fixtureOpts{yaml: yaml}, nil).ipam
	ev, err := addPod(i, pod1, att("c1", "eth0"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ips(ev)[:2]).To(Equal([]string{"1.2.128.20/28 gw 1.2.128.17", "fe10:f00d::b/125 gw fe10:f00d::9"}))
	_, _, status := i.Dump()
	g.Expect(status).To(ContainSubstring("1.2.128.16/28: 1/10 allocated, 2 excluded"))
	g.Expect(status).To(ContainSubstring("fe10:f00d::8/125: 1/3 allocated, 1 excluded"))
	_, found := i.GetPodFromIP(net.ParseIP("1.2.128.18"))
	g.Expect(found).To(BeFalse(), "an excluded address belongs to no pod")
	g.Expect(i.ReleaseIP(net.ParseIP("1.2.128.18"))).To(MatchError(ipam.ErrNotAllocated))
}

// With an external IPAM, a dual-stack node's pod subnets are its
// Kubernetes spec.podCIDRs, and a NodeUpdate that moves only the second
// family's pushes PodCIDRChange.
func TestExternalIPAMFollowsBothPodCIDRs(t *testing.T) {
	g := NewWithT(t)
	yaml := strings.Replace(dualStackConfig, "ipamConfig:\n", "ipamConfig:\n  useExternalIPAM: true\n", 1)
	ks := api.KubeStateData{"node": {node.Key(thisNode): &node.Node{Name: thisNode, Pod_CIDR: "1.2.200.0/24",
		Pod_CIDRs: []string{"1.2.200.0/24", "fe10:f00d::1:0/112"}}}}
	f := mustFixture(t, fixtureOpts{yaml: yaml}, ks)
	i := f.ipam
	g.Expect(i.PodSubnetThisNode().String()).To(Equal("1.2.200.0/24"))
	_, _, status := i.Dump()
	g.Expect(status).To(ContainSubstring("fe10:f00d::1:0/112: 0 from an external IPAM"))

	ip, err := i.AllocatePodIP(pod1, "host-local", `[{"address":"1.2.200.7/24"},{"address":"fe10:f00d::1:7/112"}]`)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ip.String()).To(Equal("1.2.200.7"))
	v4, v6, _ := i.Dump()
	g.Expect(v4).To(Equal(map[string]string{"1.2.200.7": "default/pod1"}))
	g.Expect(v6).To(Equal(map[string]string{"fe10:f00d::1:7": "default/pod1"}))
	_, err = i.AllocatePodIP(pod2, "host-local", `[{"address":"1.2.200.8/24"},{"address":"1.2.200.9/24"}]`)
	g.Expect(err).To(MatchError(ContainSubstring("of one family")))

	txn := &controllertest.Txn{OnFollowUp: f.loop.PushEvent}
	moved := &nodesync.NodeUpdate{NodeName: thisNode,
		NewState: &nodesync.Node{ID: 1, Name: thisNode, PodCIDR: cidr("1.2.200.0/24"),
			PodCIDRs: []*net.IPNet{cidr("1.2.200.0/24"), cidr("fe10:f00d::2:0/112")}}}
	change, err := i.Update(moved, txn)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(change).To(ContainSubstring("fe10:f00d::2:0/112"))
	g.Expect(f.loop.pushed()).To(HaveLen(1))
	ev := f.loop.pushed()[0].(*ipam.PodCIDRChange)
	g.Expect(ev.LocalPodCIDRs).To(HaveLen(1))
	g.Expect(ev.LocalPodCIDRs[0].String()).To(Equal("fe10:f00d::2:0/112"))

	ks["node"][node.Key(thisNode)] = &node.Node{Name: thisNode, Pod_CIDR: "1.2.200.0/24", Pod_CIDRs: []string{"1.2.200.0/24", "fe10:f00d::2:0/112"}}
	g.Expect(i.Resync(ev, ks, 2, nil)).To(Succeed())
	_, _, status = i.Dump()
	g.Expect(status).To(ContainSubstring("fe10:f00d::2:0/112"))
	g.Expect(i.GetPodIP(pod1)).To(BeNil(), "an allocation with an address outside the new subnets is gone")
}
