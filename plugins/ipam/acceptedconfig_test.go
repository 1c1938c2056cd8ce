package ipam_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/contiv-ipam/agent/plugins/contivconf"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ipam"
	"github.com/contiv-ipam/agent/plugins/ipam/addressing"
	"github.com/contiv-ipam/agent/plugins/ksr/model/node"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// The property: every contiv.conf that contivconf accepts initialises IPAM,
// for node ID 1 and for the largest node ID its subnets hold, and that ID
// is the largest (one more fails). "Initialises" means what a node needs
// from IPAM: the resync succeeds; without an external IPAM a pod gets an
// address of this node's pod subnet that is neither the gateway nor the
// NAT loopback; the VPP-host addresses exist; the node's VXLAN address and
// (when the subnet is configured) node-interconnect address exist.

// ipamParams are the ipamConfig keys the property varies (the shape of
// contivconf's FuzzParseIPAM, plus useExternalIPAM).
type ipamParams struct {
	contiv, service, pod string
	podLen               int
	host                 string
	hostLen              int
	node, vxlan, gw      string
	dhcp, external       bool
	// second is ipamConfig.dualStack (its gw, dhcp and external unused).
	second *ipamParams
}

func (p ipamParams) String() string {
	if p.second != nil {
		q := *p.second
		q.gw, q.dhcp, q.external = "", false, false
		p.second = nil
		return p.String() + " dualStack{" + q.String() + "}"
	}
	return fmt.Sprintf("contiv=%q service=%q pod=%q/%d host=%q/%d node=%q vxlan=%q gw=%q dhcp=%v external=%v",
		p.contiv, p.service, p.pod, p.podLen, p.host, p.hostLen, p.node, p.vxlan, p.gw, p.dhcp, p.external)
}

func (p ipamParams) config() contivconf.Config {
	c := contivconf.DefaultConfig()
	ic := &c.IPAMConfig
	ic.ContivCIDR, ic.ServiceCIDR, ic.PodSubnetCIDR, ic.PodSubnetOneNodePrefixLen = p.contiv, p.service, p.pod, p.podLen
	ic.VPPHostSubnetCIDR, ic.VPPHostSubnetOneNodePrefixLen, ic.NodeInterconnectCIDR = p.host, p.hostLen, p.node
	ic.VxlanCIDR, ic.DefaultGateway, ic.NodeInterconnectDHCP, ic.UseExternalIPAM = p.vxlan, p.gw, p.dhcp, p.external
	if q := p.second; q != nil {
		ic.DualStack = &contivconf.FamilyJSON{ContivCIDR: q.contiv, ServiceCIDR: q.service, PodSubnetCIDR: q.pod,
			PodSubnetOneNodePrefixLen: q.podLen, VPPHostSubnetCIDR: q.host, VPPHostSubnetOneNodePrefixLen: q.hostLen,
			NodeInterconnectCIDR: q.node, VxlanCIDR: q.vxlan}
	}
	return c
}

// acceptedSeeds are FuzzParseIPAM's seeds and the sizes at the edge of
// what IPAM needs; rejected ones are there to show where the edge is.
var acceptedSeeds = []struct {
	name   string
	p      ipamParams
	accept bool
}{
	{"defaults", ipamParams{"", "10.96.0.0/12", "10.1.0.0/16", 24, "172.30.0.0/16", 24, "", "192.168.30.0/24", "", false, false, nil}, true},
	{"contivCIDR", ipamParams{"10.128.0.0/14", "10.96.0.0/12", "", 0, "", 0, "", "", "", false, false, nil}, true},
	{"contivCIDR IPv6 with DHCP", ipamParams{"fe10::/64", "fd00::/108", "", 0, "", 0, "", "", "", true, false, nil}, true},
	{"contivCIDR with a gateway in the derived node interconnect",
		ipamParams{"10.128.0.0/14", "10.96.0.0/12", "", 0, "", 0, "", "", "10.130.0.1", false, false, nil}, true},
	{"IPv6 everywhere", ipamParams{"", "fd00::/112", "2001::/48", 60, "fe30::/90", 126, "fe10::/90", "fe20::/120", "fe10::1", false, false, nil}, true},
	{"the fixture", ipamParams{"", "10.96.0.0/12", "1.2.128.0/17", 29, "2.3.192.0/18", 30, "3.4.5.192/26", "4.5.6.192/26", "3.4.5.194", false, false, nil}, true},
	{"external IPAM", ipamParams{"", "10.96.0.0/12", "10.1.0.0/16", 24, "172.30.0.0/16", 24, "", "192.168.30.0/24", "", false, true, nil}, true},
	{"pod /29: one node of 4 pods", ipamParams{"", "10.96.0.0/12", "10.1.0.0/28", 29, "172.30.0.0/16", 24, "", "192.168.30.0/24", "", false, false, nil}, true},
	{"pod /30: no room for a pod (issue 9)", ipamParams{"", "10.96.0.0/12", "10.1.0.0/16", 30, "172.30.0.0/16", 24, "", "192.168.30.0/24", "", false, false, nil}, false},
	{"pod /30 with an external IPAM", ipamParams{"", "10.96.0.0/12", "10.1.0.0/16", 30, "172.30.0.0/16", 24, "", "192.168.30.0/24", "", false, true, nil}, false},
	{"pod /125", ipamParams{"", "fd00::/112", "fe10::/64", 125, "fe30::/64", 120, "", "fe20::/120", "", false, false, nil}, true},
	{"pod /126", ipamParams{"", "fd00::/112", "fe10::/64", 126, "fe30::/64", 120, "", "fe20::/120", "", false, false, nil}, false},
	{"pod /64 of an IPv6 /48", ipamParams{"", "fd00::/112", "2001::/48", 64, "fe30::/64", 120, "", "fe20::/120", "", false, false, nil}, true},
	{"VPP-host /30", ipamParams{"", "10.96.0.0/12", "10.1.0.0/16", 24, "172.30.0.0/16", 30, "", "192.168.30.0/24", "", false, false, nil}, true},
	{"VPP-host /31", ipamParams{"", "10.96.0.0/12", "10.1.0.0/16", 24, "172.30.0.0/16", 31, "", "192.168.30.0/24", "", false, false, nil}, false},
	{"node interconnect /30 past a gateway at host 1",
		ipamParams{"", "10.96.0.0/12", "10.1.0.0/16", 24, "172.30.0.0/16", 24, "192.168.16.0/30", "192.168.30.0/24", "192.168.16.1", false, false, nil}, true},
	{"node interconnect /30 past a gateway at the network address",
		ipamParams{"", "10.96.0.0/12", "10.1.0.0/16", 24, "172.30.0.0/16", 24, "192.168.16.0/30", "192.168.30.0/24", "192.168.16.0", false, false, nil}, true},
	{"node interconnect /31 with a gateway at host 1",
		ipamParams{"", "10.96.0.0/12", "10.1.0.0/16", 24, "172.30.0.0/16", 24, "192.168.16.0/31", "192.168.30.0/24", "192.168.16.1", false, false, nil}, false},
	{"node interconnect /127 with DHCP",
		ipamParams{"", "fd00::/112", "fe10::/64", 120, "fe30::/64", 120, "fe40::/127", "fe20::/120", "", true, false, nil}, false},
	{"vxlan /31: node ID 1 only", ipamParams{"", "10.96.0.0/12", "10.1.0.0/16", 24, "172.30.0.0/16", 24, "", "192.168.30.0/31", "", false, false, nil}, true},
	{"vxlan /32", ipamParams{"", "10.96.0.0/12", "10.1.0.0/16", 24, "172.30.0.0/16", 24, "", "192.168.30.1/32", "", false, false, nil}, false},
	{"vxlan /128", ipamParams{"", "fd00::/112", "fe10::/64", 120, "fe30::/64", 120, "", "fe20::1/128", "", false, false, nil}, false},
	{"node IDs beyond 2^32", ipamParams{"", "fd00::/112", "2001::/32", 120, "fe30::/32", 120, "fe40::/64", "fe20::/64", "", false, false, nil}, true},
	{"dual stack, the IPv6 family holds fewer nodes", ipamParams{"", "10.96.0.0/12", "10.1.0.0/16", 24, "172.30.0.0/16", 24, "", "192.168.30.0/24", "", false, false,
		&ipamParams{"", "fd00::/112", "fe10::/120", 124, "fe30::/64", 120, "", "fe20::/120", "", false, false, nil}}, true},
	{"dual stack, IPv6 primary", ipamParams{"", "fd00::/112", "fe10::/64", 120, "fe30::/64", 120, "fe40::/64", "fe20::/120", "fe40::1", false, false,
		&ipamParams{"", "10.96.0.0/12", "10.1.0.0/20", 28, "172.30.0.0/16", 24, "192.168.16.0/24", "192.168.30.0/26", "", false, false, nil}}, true},
	{"dual stack with contivCIDR in the second family", ipamParams{"10.128.0.0/14", "10.96.0.0/12", "", 0, "", 0, "", "", "", false, false,
		&ipamParams{"fe10::/64", "fd00::/108", "", 0, "", 0, "", "", "", false, false, nil}}, true},
	{"dual stack of one family", ipamParams{"", "10.96.0.0/12", "10.1.0.0/16", 24, "172.30.0.0/16", 24, "", "192.168.30.0/24", "", false, false,
		&ipamParams{"", "10.97.0.0/16", "10.2.0.0/16", 24, "172.31.0.0/16", 24, "", "192.168.31.0/24", "", false, false, nil}}, false},
	{"dual stack with external IPAM", ipamParams{"", "10.96.0.0/12", "10.1.0.0/16", 24, "172.30.0.0/16", 24, "", "192.168.30.0/24", "", false, true,
		&ipamParams{"", "fd00::/112", "fe10::/48", 64, "fe30::/64", 120, "", "fe20::/120", "", false, false, nil}}, true},
}

// TestEveryAcceptedSeedInitialises runs the property on the named seeds;
// each is accepted or refused as its name says.
func TestEveryAcceptedSeedInitialises(t *testing.T) {
	for _, s := range acceptedSeeds {
		t.Run(s.name, func(t *testing.T) {
			accepted := checkAcceptedInitialises(t, s.p)
			if accepted != s.accept {
				t.Fatalf("%v: accepted %v, want %v", s.p, accepted, s.accept)
			}
		})
	}
}

// TestEveryAcceptedRandomConfigInitialises runs the property on configs
// drawn near the edges of the sizes (a fixed seed: the same configs every
// run). Both outcomes must be well represented, or the generator tests
// nothing.
func TestEveryAcceptedRandomConfigInitialises(t *testing.T) {
	accepted := runRandomConfigs(t, rand.New(rand.NewPCG(9, 2024)), 600, randomParams)
	if accepted < 600/5 || accepted > 600*4/5 {
		t.Fatalf("%d of 600 random configs accepted: the generator no longer covers both sides of the edge", accepted)
	}
}

// TestEveryAcceptedRandomDualStackConfigInitialises runs the property on
// dual-stack configs: both families are cut from one node ID, so the
// largest ID is the smaller of the two families' (and MaxNodeID, which
// bounds nodesync's claims, must say so).
func TestEveryAcceptedRandomDualStackConfigInitialises(t *testing.T) {
	if accepted := runRandomConfigs(t, rand.New(rand.NewPCG(15, 2026)), 300, randomDualStack); accepted < 300/20 {
		t.Fatalf("%d of 300 random dual-stack configs accepted: the generator no longer covers the accepted side", accepted)
	}
}

// runRandomConfigs checks the property on n configs drawn by draw and
// returns how many were accepted.
func runRandomConfigs(t *testing.T, r *rand.Rand, n int, draw func(*rand.Rand) ipamParams) int {
	accepted := 0
	for i := range n {
		p := draw(r)
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			if checkAcceptedInitialises(t, p) {
				accepted++
			}
		})
	}
	t.Logf("%d of %d random configs accepted (and initialised)", accepted, n)
	return accepted
}

// FuzzAcceptedConfigInitialises is the property over arbitrary keys.
func FuzzAcceptedConfigInitialises(f *testing.F) {
	for _, s := range acceptedSeeds {
		p := s.p
		if p.second != nil {
			continue // the fuzz arguments are one family's
		}
		f.Add(p.contiv, p.service, p.pod, p.podLen, p.host, p.hostLen, p.node, p.vxlan, p.gw, p.dhcp, p.external)
	}
	f.Fuzz(func(t *testing.T, contiv, service, pod string, podLen int, host string, hostLen int, node, vxlan, gw string, dhcp, external bool) {
		checkAcceptedInitialises(t, ipamParams{contiv, service, pod, podLen, host, hostLen, node, vxlan, gw, dhcp, external, nil})
	})
}

// checkAcceptedInitialises reports whether contivconf accepts p and, when
// it does, fails t unless IPAM initialises for node ID 1 and for the
// largest node ID that fits, and fails for one more.
func checkAcceptedInitialises(t *testing.T, p ipamParams) bool {
	t.Helper()
	cfg := p.config()
	if _, err := contivconf.Parse(&cfg); err != nil {
		return false
	}
	conf := startContivConf(t, cfg)
	maxID := largestNodeID(conf.GetIPAMConfig(), conf.GetStaticDefaultGW())
	if maxID < 1 {
		t.Fatalf("%v: accepted, but no node ID fits", p)
	}
	// MaxNodeID (what nodesync bounds its claims by) is computed from the
	// arithmetic itself, the closed form here from the sizes alone.
	if got := ipam.MaxNodeID(conf.GetIPAMConfig(), conf.GetStaticDefaultGW()); got != maxID {
		t.Fatalf("%v: MaxNodeID %d, but the largest node ID that fits is %d", p, got, maxID)
	}
	for _, id := range []uint32{1, maxID} {
		if err := initialise(t, conf, id); err != nil {
			t.Fatalf("%v: accepted, but node ID %d (largest that fits: %d) does not initialise: %v", p, id, maxID, err)
		}
	}
	if maxID < math.MaxUint32 {
		if err := initialise(t, conf, maxID+1); err == nil {
			t.Fatalf("%v: node ID %d initialises: %d is not the largest that fits", p, maxID+1, maxID)
		}
	}
	return true
}

// startContivConf starts contivconf with cfg, as the fixture does.
func startContivConf(t *testing.T, cfg contivconf.Config) *contivconf.Plugin {
	t.Helper()
	c := contivconf.NewPlugin(contivconf.UseConf(cfg), contivconf.UseDeps(func(d *contivconf.Deps) {
		d.Log, d.ServiceLabel = quietLog(), fakeLabel{thisNode}
	}))
	if err := c.Init(); err != nil {
		t.Fatalf("contivconf Init of an accepted config: %v", err)
	}
	return c
}

// largestNodeID is the largest node ID (at most 2^32-1) whose subnets and
// addresses all exist: its pod and VPP-host subnets (ID 2^n takes subnet
// 0), its VXLAN address (host ID) and its node-interconnect address (host
// ID, or ID+1 past a gateway inside the subnet).
func largestNodeID(c *contivconf.IPAMConfig, gw netip.Addr) uint32 {
	limit := uint64(math.MaxUint32)
	for i, f := range c.Families() {
		if i > 0 {
			gw = netip.Addr{} // the static default gateway is the primary family's
		}
		limit = min(limit, familyLimit(f, gw))
	}
	return uint32(limit)
}

// familyLimit is largestNodeID for one family.
func familyLimit(c contivconf.FamilyConfig, gw netip.Addr) uint64 {
	limit := min(count(c.PodSubnetOneNodePrefixLen-c.PodSubnetCIDR.Bits()),
		count(c.VPPHostSubnetOneNodePrefixLen-c.VPPHostSubnetCIDR.Bits()),
		count(hostBits(c.VxlanCIDR))-1)
	if n := c.NodeInterconnectCIDR; n.IsValid() {
		hosts := count(hostBits(n)) - 1
		if gw.IsValid() && n.Contains(gw) {
			hosts--
		}
		limit = min(limit, hosts)
	}
	return min(limit, math.MaxUint32)
}

func hostBits(p netip.Prefix) int { return p.Addr().BitLen() - p.Bits() }

// count is 2^bits, saturating above 2^33 (node IDs are 32-bit).
func count(bits int) uint64 { return 1 << min(bits, 33) }

// initialise builds IPAM on conf for node ID id, as the fixture does, and
// returns the first thing this node cannot get.
func initialise(t *testing.T, conf *contivconf.Plugin, id uint32) (err error) {
	t.Helper()
	ns := &fakeNodeSync{}
	ns.id.Store(id)
	i := ipam.NewPlugin(ipam.UseDeps(func(d *ipam.Deps) {
		d.Log, d.ContivConf, d.NodeSync, d.ServiceLabel = quietLog(), conf, ns, fakeLabel{thisNode}
	}))
	defer func() { err = errors.Join(err, i.Close()) }()
	if err := i.Init(); err != nil {
		return fmt.Errorf("Init: %w", err)
	}
	if err := i.AfterInit(); err != nil {
		return fmt.Errorf("AfterInit: %w", err)
	}
	ks, err := externalPodCIDRs(conf.GetIPAMConfig(), id)
	if err != nil {
		return err
	}
	if err := i.Resync(&api.DBResync{KubeState: ks}, ks, 1, nil); err != nil {
		return fmt.Errorf("Resync: %w", err)
	}
	if i.HostInterconnectIPInVPP() == nil || i.HostInterconnectIPInLinux() == nil {
		return errors.New("no VPP-host addresses")
	}
	if _, _, err := i.VxlanIPAddress(id); err != nil {
		return fmt.Errorf("VxlanIPAddress: %w", err)
	}
	if conf.GetIPAMConfig().NodeInterconnectCIDR.IsValid() {
		if _, _, err := i.NodeIPAddress(id); err != nil {
			return fmt.Errorf("NodeIPAddress: %w", err)
		}
	}
	if conf.GetIPAMConfig().UseExternalIPAM {
		return nil // pod addresses come from the external IPAM
	}
	if err := checkPodAddress(i); err != nil {
		return err
	}
	if conf.GetIPAMConfig().Second == nil {
		return nil
	}
	v4, v6, err := i.AllocateNext("", "probe")
	if err != nil || v4 == nil || v6 == nil {
		return fmt.Errorf("AllocateNext of both families: %v, %v, %w", v4, v6, err)
	}
	return nil
}

// checkPodAddress allocates one pod address and checks where it lies.
func checkPodAddress(i *ipam.Plugin) error {
	ip, err := i.AllocatePodIP(podmodel.ID{Name: "p", Namespace: "ns"}, "", "")
	if err != nil {
		return fmt.Errorf("AllocatePodIP: %w", err)
	}
	if !i.PodSubnetThisNode().Contains(ip) || ip.Equal(i.PodGatewayIP()) || ip.Equal(i.NatLoopbackIP()) {
		return fmt.Errorf("pod address %v: outside %v or the gateway %v or the NAT loopback %v",
			ip, i.PodSubnetThisNode(), i.PodGatewayIP(), i.NatLoopbackIP())
	}
	return nil
}

// randomParams draws a config whose sizes sit near the edges: one-node
// prefix lengths and node subnets of a few addresses, cluster prefixes
// from short to equal, gateways around the node-interconnect subnet's
// first and last addresses, for both families, with and without
// contivCIDR, DHCP and an external IPAM.
func randomParams(r *rand.Rand) ipamParams { return randomFamily(r, r.IntN(2) == 0) }

// randomDualStack draws a primary family and a second one of the other
// family (which ignores gw, dhcp and external).
func randomDualStack(r *rand.Rand) ipamParams {
	v6 := r.IntN(2) == 0
	p, q := randomFamily(r, v6), randomFamily(r, !v6)
	q.gw, q.dhcp, q.external = "", false, false
	p.second = &q
	return p
}

func randomFamily(r *rand.Rand, v6 bool) ipamParams {
	bits, base := 32, []string{"10.0.0.0", "172.16.0.0", "192.168.0.0", "192.169.0.0", "100.64.0.0/10"}
	if v6 {
		bits, base = 128, []string{"fd01::", "fd02::", "fd03::", "fd04::", "fd05::/112"}
	}
	p := ipamParams{service: base[4], dhcp: r.IntN(4) == 0, external: r.IntN(5) == 0}
	if r.IntN(5) == 0 {
		p.contiv = fmt.Sprintf("%s/%d", base[0], bits-16-r.IntN(5))
	} else {
		p.podLen, p.pod = nearEdge(r, bits, 3, base[0])
		p.hostLen, p.host = nearEdge(r, bits, 2, base[1])
		p.vxlan = fmt.Sprintf("%s/%d", base[3], bits-r.IntN(4))
	}
	if r.IntN(3) > 0 {
		p.node = fmt.Sprintf("%s/%d", base[2], bits-1-r.IntN(4))
	}
	p.gw = randomGateway(r, p.node, base[2])
	return p
}

// nearEdge draws a one-node prefix length from one past the edge
// bits-minHostBits to two before it (sometimes much shorter) and a cluster
// subnet at base of a length from one
// below it to several bits shorter (sometimes not shorter: refused).
func nearEdge(r *rand.Rand, bits, minHostBits int, base string) (oneNode int, cluster string) {
	oneNode = bits - minHostBits + 1 - r.IntN(4)
	if r.IntN(4) == 0 {
		oneNode = bits - minHostBits - r.IntN(bits/2)
	}
	clusterLen := max(oneNode-1-r.IntN(10), 8)
	if r.IntN(10) == 0 {
		clusterLen = oneNode
	}
	return oneNode, fmt.Sprintf("%s/%d", base, clusterLen)
}

// randomGateway is none, or an address at or near the start or the end of
// the node-interconnect subnet (or of where it would be).
func randomGateway(r *rand.Rand, node, base string) string {
	if r.IntN(3) == 0 {
		return ""
	}
	p, err := netip.ParsePrefix(node)
	if err != nil {
		p = netip.PrefixFrom(netip.MustParseAddr(base), 24)
	}
	first := p.Masked().Addr()
	last := lastAddr(p)
	switch r.IntN(4) {
	case 0:
		return first.String()
	case 1:
		return first.Next().String()
	case 2:
		return last.String()
	default:
		return last.Next().String()
	}
}

func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().AsSlice()
	hb := hostBits(p)
	for i := len(a) - 1; i >= 0 && hb > 0; i-- {
		n := min(hb, 8)
		a[i] |= byte(1<<n - 1)
		hb -= n
	}
	out, _ := netip.AddrFromSlice(a)
	return out
}

// externalPodCIDRs is the Kubernetes state of initialise: with
// useExternalIPAM, this node's record with the pod CIDRs that node ID id
// would get from the config (IPAM waits without one); else empty.
func externalPodCIDRs(cfg *contivconf.IPAMConfig, id uint32) (api.KubeStateData, error) {
	if !cfg.UseExternalIPAM {
		return api.KubeStateData{}, nil
	}
	st, err := addressing.BuildState(cfg, id, thisNode, netip.Addr{}, addressing.PodCIDRs{})
	if err != nil {
		return nil, fmt.Errorf("the pod CIDRs of node ID %d: %w", id, err)
	}
	var cidrs []string
	for _, p := range st.PodSubnets() {
		if p.IsValid() {
			cidrs = append(cidrs, p.String())
		}
	}
	return api.KubeStateData{"node": {node.Key(thisNode): &node.Node{Name: thisNode, Pod_CIDRs: cidrs}}}, nil
}
