package ipam_test

import (
	"fmt"
	"net"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/engine/ipalloc"
	"github.com/contiv-ipam/agent/plugins/ipam"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// The scenarios of spec §2.15, one test each (SRv6 lines left out).

func TestStaticGetters(t *testing.T) {
	g := NewWithT(t)
	f := mustFixture(t, fixtureOpts{}, nil)
	i := f.ipam
	g.Expect(i.PodSubnetAllNodes().String()).To(Equal("1.2.128.0/17"))
	g.Expect(i.PodSubnetThisNode().String()).To(Equal("1.2.128.8/29"))
	g.Expect(i.PodGatewayIP().String()).To(Equal("1.2.128.9"))
	g.Expect(i.PodSubnetThisNode().Contains(i.PodGatewayIP())).To(BeTrue())
	g.Expect(i.NatLoopbackIP().String()).To(Equal("1.2.128.14"))
	g.Expect(i.HostInterconnectSubnetThisNode().String()).To(Equal("2.3.192.4/30"))
	g.Expect(i.HostInterconnectSubnetAllNodes().String()).To(Equal("2.3.192.0/18"))
	g.Expect(i.HostInterconnectIPInVPP().String()).To(Equal("2.3.192.5"))
	g.Expect(i.HostInterconnectIPInLinux().String()).To(Equal("2.3.192.6"))
	g.Expect(i.ServiceNetwork().String()).To(Equal("10.96.0.0/12"))
	g.Expect(i.PodGatewayIP()).To(HaveLen(net.IPv4len))
}

func TestDynamicGetters(t *testing.T) {
	g := NewWithT(t)
	i := mustFixture(t, fixtureOpts{}, nil).ipam
	ip, network, err := i.NodeIPAddress(5)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ip.String()).To(Equal("3.4.5.197"))
	g.Expect(network.String()).To(Equal("3.4.5.192/26"))
	ip, network, err = i.VxlanIPAddress(5)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ip.String()).To(Equal("4.5.6.197"))
	g.Expect(network.String()).To(Equal("4.5.6.192/26"))
	sub, err := i.PodSubnetOtherNode(5)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sub.String()).To(Equal("1.2.128.40/29"))
	id, err := i.NodeIDFromPodIP(net.ParseIP("1.2.128.40"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(id).To(Equal(uint32(5)))
	sub, err = i.HostInterconnectSubnetOtherNode(5)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sub.String()).To(Equal("2.3.192.20/30"))
}

// The original scenario used fe10:f00d::/90 for both the pod subnet and
// the node interconnect; overlapping subnets are refused now (see
// TestOverlappingSubnetsAreRefused), so the node interconnect moved.
func TestDynamicGettersIPv6(t *testing.T) {
	g := NewWithT(t)
	i := mustFixture(t, fixtureOpts{yaml: ipv6TestConfig}, nil).ipam
	ip, network, err := i.NodeIPAddress(5)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ip.String()).To(Equal("fe40:f00d::5"))
	g.Expect(network.String()).To(Equal("fe40:f00d::/90"))
	ip, network, err = i.VxlanIPAddress(5)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ip.String()).To(Equal("fe20:f00d::5"))
	ones, _ := network.Mask.Size()
	g.Expect(ones).To(Equal(120))
	sub, err := i.PodSubnetOtherNode(5)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sub.String()).To(Equal("fe10:f00d::500/120"))
	id, err := i.NodeIDFromPodIP(net.ParseIP("fe10:f00d::500"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(id).To(Equal(uint32(5)))
	sub, err = i.HostInterconnectSubnetOtherNode(5)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sub.String()).To(Equal("fe30:f00d::14/126"))
}

func TestOverlappingSubnetsAreRefused(t *testing.T) {
	g := NewWithT(t)
	_, err := build(t, fixtureOpts{yaml: `
ipamConfig:
  podSubnetCIDR: fe10:f00d::/90
  podSubnetOneNodePrefixLen: 120
  vppHostSubnetCIDR: fe30:f00d::/90
  vppHostSubnetOneNodePrefixLen: 126
  nodeInterconnectCIDR: fe10:f00d::/90
  vxlanCIDR: fe20:f00d::/120
  serviceCIDR: fd00:96::/110
`})
	g.Expect(err).To(MatchError(ContainSubstring("fe10:f00d::/90")))
	g.Expect(err).To(MatchError(ContainSubstring("nodeInterconnectCIDR")))
}

func TestBasicAllocateReleasePodAddress(t *testing.T) {
	g := NewWithT(t)
	i := mustFixture(t, fixtureOpts{}, nil).ipam
	ip, err := i.AllocatePodIP(pod1, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(i.PodSubnetThisNode().Contains(ip)).To(BeTrue())
	g.Expect(i.GetPodIP(pod1).String()).To(Equal(ip.String() + "/32"))
	got, found := i.GetPodFromIP(ip)
	g.Expect(found).To(BeTrue())
	g.Expect(got).To(Equal(pod1))
	g.Expect(i.ReleasePodIP(pod1)).To(Succeed())
	g.Expect(i.GetPodIP(pod1)).To(BeNil())
	_, found = i.GetPodFromIP(ip)
	g.Expect(found).To(BeFalse())
	g.Expect(i.ReleasePodIP(pod1)).To(Succeed(), "releasing twice is not an error")
}

func TestBasicAllocateReleasePodAddressIPv6(t *testing.T) {
	g := NewWithT(t)
	i := mustFixture(t, fixtureOpts{yaml: ipv6TestConfig}, nil).ipam
	g.Expect(i.PodSubnetThisNode().String()).To(Equal("fe10:f00d::100/120"))
	ip, err := i.AllocatePodIP(pod1, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(i.PodSubnetThisNode().Contains(ip)).To(BeTrue())
	g.Expect(ip.String()).To(Equal("fe10:f00d::102"))
	g.Expect(i.GetPodIP(pod1).String()).To(Equal("fe10:f00d::102/128"))
	g.Expect(i.ReleasePodIP(pod1)).To(Succeed())
}

func TestWideIPv6PodSubnet(t *testing.T) {
	g := NewWithT(t)
	i := mustFixture(t, fixtureOpts{yaml: `
ipamConfig:
  podSubnetCIDR: 2001::/48
  podSubnetOneNodePrefixLen: 60
  vppHostSubnetCIDR: fe30:f00d::/90
  vppHostSubnetOneNodePrefixLen: 126
  nodeInterconnectCIDR: fe40:f00d::/90
  vxlanCIDR: fe20:f00d::/120
  serviceCIDR: fd00:96::/110
`}, nil).ipam
	g.Expect(i.PodSubnetThisNode().String()).To(Equal("2001:0:0:10::/60"))
	ip, err := i.AllocatePodIP(pod1, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(i.PodSubnetThisNode().Contains(ip)).To(BeTrue())
	g.Expect(i.ReleasePodIP(pod1)).To(Succeed())
}

func TestAlreadyAllocatedAddress(t *testing.T) {
	g := NewWithT(t)
	i := mustFixture(t, fixtureOpts{}, nil).ipam
	a, err := i.AllocatePodIP(pod1, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	b, err := i.AllocatePodIP(pod1, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b).To(Equal(a))
}

func TestAssigningIncrementalIPs(t *testing.T) {
	g := NewWithT(t)
	i := mustFixture(t, fixtureOpts{}, nil).ipam
	alloc := func(id podmodel.ID) string {
		ip, err := i.AllocatePodIP(id, "", "")
		g.Expect(err).NotTo(HaveOccurred())
		return ip.String()
	}
	g.Expect(alloc(pod1)).To(Equal("1.2.128.10"))
	g.Expect(alloc(pod2)).To(Equal("1.2.128.11"))
	g.Expect(i.ReleasePodIP(pod2)).To(Succeed())
	g.Expect(alloc(pod3)).To(Equal("1.2.128.12"), "a released address is not reused before the range wraps")
	g.Expect(alloc(pod4)).To(Equal("1.2.128.13"))
	g.Expect(alloc(pod2)).To(Equal("1.2.128.11"), "reuse after the wrap")
}

func TestDistinctAllocations(t *testing.T) {
	g := NewWithT(t)
	i := mustFixture(t, fixtureOpts{}, nil).ipam
	seen := map[string]bool{}
	for _, id := range []podmodel.ID{pod1, pod2, pod3, pod4} {
		ip, err := i.AllocatePodIP(id, "", "")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(i.PodSubnetThisNode().Contains(ip)).To(BeTrue())
		g.Expect(ip.String()).NotTo(BeElementOf("1.2.128.8", "1.2.128.9", "1.2.128.14", "1.2.128.15"))
		g.Expect(seen).NotTo(HaveKey(ip.String()))
		seen[ip.String()] = true
	}
	_, err := i.AllocatePodIP(podmodel.ID{Name: "pod5", Namespace: "default"}, "", "")
	g.Expect(err).To(MatchError(ContainSubstring("no IP address is free for allocation in the subnet 1.2.128.8/29")))
}

func TestReleaseOfAllIPAddresses(t *testing.T) {
	g := NewWithT(t)
	i := mustFixture(t, fixtureOpts{}, nil).ipam
	pods := []podmodel.ID{pod1, pod2, pod3, pod4}
	for round := 0; round < 2; round++ {
		seen := map[string]bool{}
		for _, id := range pods {
			ip, err := i.AllocatePodIP(id, "", "")
			g.Expect(err).NotTo(HaveOccurred(), "round %d", round)
			g.Expect(seen).NotTo(HaveKey(ip.String()))
			seen[ip.String()] = true
		}
		for _, id := range pods {
			g.Expect(i.ReleasePodIP(id)).To(Succeed())
		}
	}
}

func TestReleaseOfSomeIPAddresses(t *testing.T) {
	g := NewWithT(t)
	i := mustFixture(t, fixtureOpts{}, nil).ipam
	for _, id := range []podmodel.ID{pod1, pod2, pod3, pod4} {
		_, err := i.AllocatePodIP(id, "", "")
		g.Expect(err).NotTo(HaveOccurred())
	}
	released := []string{i.GetPodIP(pod3).IP.String(), i.GetPodIP(pod4).IP.String()}
	g.Expect(i.ReleasePodIP(pod3)).To(Succeed())
	g.Expect(i.ReleasePodIP(pod4)).To(Succeed())
	for n := 5; n <= 6; n++ {
		ip, err := i.AllocatePodIP(podmodel.ID{Name: fmt.Sprintf("pod%d", n), Namespace: "default"}, "", "")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ip.String()).To(BeElementOf(released))
	}
	_, err := i.AllocatePodIP(podmodel.ID{Name: "pod7", Namespace: "default"}, "", "")
	g.Expect(err).To(MatchError(ipalloc.ErrPoolExhausted))
	g.Expect(err).To(MatchError(ContainSubstring("no IP address is free for allocation in the subnet 1.2.128.8/29")))
}

// fill allocates until the pool is exhausted and checks every address.
func fill(t *testing.T, i *ipam.Plugin, want int, subnet string) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(i.PodSubnetThisNode().String()).To(Equal(subnet))
	seen := map[string]bool{}
	for n := 0; n < want; n++ {
		ip, err := i.AllocatePodIP(podmodel.ID{Name: fmt.Sprintf("p%d", n), Namespace: "ns"}, "", "")
		g.Expect(err).NotTo(HaveOccurred(), "allocation %d", n)
		g.Expect(i.PodSubnetThisNode().Contains(ip)).To(BeTrue())
		g.Expect(seen).NotTo(HaveKey(ip.String()))
		seen[ip.String()] = true
	}
	_, err := i.AllocatePodIP(podmodel.ID{Name: "one-too-many", Namespace: "ns"}, "", "")
	g.Expect(err).To(MatchError(ipalloc.ErrPoolExhausted))
}

func Test8bitPodIPPoolSize(t *testing.T) {
	i := mustFixture(t, fixtureOpts{yaml: `
ipamConfig:
  podSubnetCIDR: 1.2.3.4/16
  podSubnetOneNodePrefixLen: 24
  vppHostSubnetCIDR: 2.3.192.0/18
  vppHostSubnetOneNodePrefixLen: 30
  nodeInterconnectCIDR: 3.4.5.192/26
  vxlanCIDR: 4.5.6.192/26
`}, nil).ipam
	fill(t, i, 252, "1.2.1.0/24")
}

func TestBiggerThan8bitPodIPPoolSize(t *testing.T) {
	i := mustFixture(t, fixtureOpts{yaml: `
ipamConfig:
  podSubnetCIDR: 1.4.1.2/14
  podSubnetOneNodePrefixLen: 22
  vppHostSubnetCIDR: 2.3.192.0/18
  vppHostSubnetOneNodePrefixLen: 30
  nodeInterconnectCIDR: 3.4.5.192/26
  vxlanCIDR: 4.5.6.192/26
`}, nil).ipam
	fill(t, i, 1020, "1.4.4.0/22")
}

const sixteenNodesConfig = `
ipamConfig:
  podSubnetCIDR: 1.4.1.0/24
  podSubnetOneNodePrefixLen: 28
  vppHostSubnetCIDR: 2.3.192.0/18
  vppHostSubnetOneNodePrefixLen: 30
  nodeInterconnectCIDR: 3.4.5.192/26
  vxlanCIDR: 4.5.6.192/26
`

func TestPodSubnetThisNodeSubnets(t *testing.T) {
	g := NewWithT(t)
	i := mustFixture(t, fixtureOpts{yaml: sixteenNodesConfig, nodeID: 1}, nil).ipam
	g.Expect(i.PodSubnetThisNode().String()).To(Equal("1.4.1.16/28"))
	ip, _, err := i.NodeIPAddress(1)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ip.String()).To(Equal("3.4.5.193"))

	i = mustFixture(t, fixtureOpts{yaml: sixteenNodesConfig, nodeID: 16}, nil).ipam
	g.Expect(i.PodSubnetThisNode().String()).To(Equal("1.4.1.0/28"), "the highest ID wraps to subnet 0")
	ip, _, err = i.NodeIPAddress(16)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ip.String()).To(Equal("3.4.5.208"))

	_, err = newFixture(t, fixtureOpts{yaml: sixteenNodesConfig, nodeID: 17}, nil)
	g.Expect(err).To(MatchError(ContainSubstring("node ID 17 does not fit 1.4.1.0/24")))
}

func TestMoreThan256Node(t *testing.T) {
	g := NewWithT(t)
	i := mustFixture(t, fixtureOpts{nodeID: 257, yaml: `
ipamConfig:
  podSubnetCIDR: 1.4.0.0/17
  podSubnetOneNodePrefixLen: 28
  vppHostSubnetCIDR: 2.3.192.0/18
  vppHostSubnetOneNodePrefixLen: 30
  nodeInterconnectCIDR: 1.1.128.0/17
  vxlanCIDR: 2.2.128.0/17
`}, nil).ipam
	ip, _, err := i.NodeIPAddress(257)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ip.String()).To(Equal("1.1.129.1"))
	ip, _, err = i.VxlanIPAddress(257)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ip.String()).To(Equal("2.2.129.1"))
}

func TestExceededVxlanRange(t *testing.T) {
	g := NewWithT(t)
	i := mustFixture(t, fixtureOpts{nodeID: 17, yaml: `
ipamConfig:
  podSubnetCIDR: 1.4.1.0/17
  podSubnetOneNodePrefixLen: 28
  vppHostSubnetCIDR: 2.3.192.0/18
  vppHostSubnetOneNodePrefixLen: 30
  nodeInterconnectCIDR: 3.4.5.192/26
  vxlanCIDR: 2.2.2.128/28
`}, nil).ipam
	_, _, err := i.VxlanIPAddress(16)
	g.Expect(err).To(MatchError(ContainSubstring("no free address for nodeID 16")))
	_, _, err = i.VxlanIPAddress(17)
	g.Expect(err).To(MatchError(ContainSubstring("nodeID is out of the valid range 17 > 16")))
}

func TestExceededNodeIPRange(t *testing.T) {
	g := NewWithT(t)
	i := mustFixture(t, fixtureOpts{nodeID: 17, yaml: `
ipamConfig:
  podSubnetCIDR: 1.2.128.0/17
  podSubnetOneNodePrefixLen: 29
  vppHostSubnetCIDR: 2.3.192.0/18
  vppHostSubnetOneNodePrefixLen: 30
  nodeInterconnectCIDR: 3.3.3.0/28
  vxlanCIDR: 2.2.2.128/25
`}, nil).ipam
	_, _, err := i.NodeIPAddress(16)
	g.Expect(err).To(MatchError(ipam.ErrNodeIDRange))
	g.Expect(err).To(MatchError(ContainSubstring("no free address for nodeID 16 in 3.3.3.0/28")))
	_, _, err = i.NodeIPAddress(17)
	g.Expect(err).To(MatchError(ipam.ErrNodeIDRange))
	g.Expect(err).To(MatchError(ContainSubstring("17 > 16 of 3.3.3.0/28")))
	ip, _, err := i.NodeIPAddress(15)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ip.String()).To(Equal("3.3.3.15"))
}

func TestNodeCIDRIPv6(t *testing.T) {
	g := NewWithT(t)
	i := mustFixture(t, fixtureOpts{yaml: ipv6TestConfig}, nil).ipam
	ip, network, err := i.NodeIPAddress(1)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ip.String()).To(Equal("fe40:f00d::1"))
	g.Expect(network.String()).To(Equal("fe40:f00d::/90"))
}

func TestConfigWithBadCIDR(t *testing.T) {
	for _, key := range []string{"podSubnetCIDR", "vppHostSubnetCIDR", "nodeInterconnectCIDR"} {
		t.Run(key, func(t *testing.T) {
			g := NewWithT(t)
			_, err := build(t, fixtureOpts{yaml: "ipamConfig:\n  " + key + ": 1.2.3./19\n"})
			g.Expect(err).To(MatchError(ContainSubstring(key)))
			g.Expect(err).To(MatchError(ContainSubstring("1.2.3./19")))
		})
	}
}

func TestConfigWithBadPrefixSizes(t *testing.T) {
	for _, c := range []struct{ cidr, prefix string }{
		{"podSubnetCIDR", "podSubnetOneNodePrefixLen"},
		{"vppHostSubnetCIDR", "vppHostSubnetOneNodePrefixLen"},
	} {
		t.Run(c.cidr, func(t *testing.T) {
			g := NewWithT(t)
			yaml := fmt.Sprintf("ipamConfig:\n  %s: 1.2.3.4/19\n  %s: 18\n", c.cidr, c.prefix)
			_, err := build(t, fixtureOpts{yaml: yaml})
			g.Expect(err).To(MatchError(ContainSubstring(c.prefix)))
		})
	}
}

func TestExcludeGateway(t *testing.T) {
	g := NewWithT(t)
	i := mustFixture(t, fixtureOpts{yaml: defaultTestConfig + `
nodeConfig:
  - nodeName: node
    gateway: 3.4.5.194
`}, nil).ipam
	var got []string
	for id := uint32(1); id <= 3; id++ {
		ip, _, err := i.NodeIPAddress(id)
		g.Expect(err).NotTo(HaveOccurred())
		got = append(got, ip.String())
	}
	g.Expect(got).To(Equal([]string{"3.4.5.193", "3.4.5.195", "3.4.5.196"}))
}

func TestPodCIDRChangeEvent(t *testing.T) {
	g := NewWithT(t)
	ev := &ipam.PodCIDRChange{LocalPodCIDR: cidr("10.2.3.0/24")}
	g.Expect(ev.GetName()).To(Equal("Pod CIDR Change"))
	g.Expect(ev.String()).To(Equal("Pod CIDR Change\n* LocalPodCIDR: 10.2.3.0/24"))
	g.Expect(ev.IsBlocking()).To(BeFalse())
	g.Expect(ev.Method().String()).To(Equal("UpstreamResync"))
	ev.Done(nil)
}

func TestGettersBeforeResync(t *testing.T) {
	g := NewWithT(t)
	f, err := build(t, fixtureOpts{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.ipam.PodSubnetThisNode()).To(BeNil())
	g.Expect(f.ipam.PodGatewayIP()).To(BeNil())
	_, _, err = f.ipam.NodeIPAddress(1)
	g.Expect(err).To(MatchError(ContainSubstring("not initialised")))
	_, err = f.ipam.AllocatePodIP(pod1, "", "")
	g.Expect(err).To(MatchError(ContainSubstring("not initialised")))
}

func TestBadPodIDIsRefused(t *testing.T) {
	g := NewWithT(t)
	i := mustFixture(t, fixtureOpts{}, nil).ipam
	for _, id := range []podmodel.ID{{}, {Name: "a"}, {Namespace: "ns"}, {Name: "a/b", Namespace: "ns"}} {
		_, err := i.AllocatePodIP(id, "", "")
		g.Expect(err).To(MatchError(ContainSubstring("want a name and a namespace")), "%+v", id)
	}
}
