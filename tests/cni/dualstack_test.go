package cni

import (
	"encoding/json"
	"fmt"
	"math/big"
	"net/netip"
	"testing"

	"github.com/containernetworking/cni/libcni"
	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/tests/testenv"
)

// dsNode is an agent serving two address families: the primary (IPv4)
// of node, and the second (IPv6) pod subnet with its gateway.
type dsNode struct {
	*node
	subnet6  netip.Prefix
	gateway6 netip.Addr
}

// startDualStack starts an agent on dualStackConf (ipam.conf replaced
// when ipamConf is not empty) and reads both pod subnets.
func startDualStack(t *testing.T, ipamConf string) *dsNode {
	t.Helper()
	conf := map[string]string{"contiv.conf": testenv.DualStackConf(t)}
	if ipamConf != "" {
		conf["ipam.conf"] = ipamConf
	}
	n := &dsNode{node: startNode(t, testenv.Options{Conf: conf})}
	n.readSubnet6(t)
	g := NewWithT(t)
	g.Expect(n.subnet.Addr().Is4()).To(BeTrue(), "primary pod subnet %s", n.subnet)
	g.Expect(n.subnet.Bits()).To(Equal(28))
	g.Expect(n.subnet6.Bits()).To(Equal(120))
	return n
}

// readSubnet6 computes this node's IPv6 pod subnet from GET
// /contiv/v1/ipam: the node ID-th /podSubnetOneNodePrefixLen of
// config.dualStack.podSubnetCIDR (contiv.conf's rule), gateway its first
// host.
func (n *dsNode) readSubnet6(t *testing.T) {
	t.Helper()
	code, body := n.agent.Get(t, "/contiv/v1/ipam")
	if code != 200 {
		t.Fatalf("GET /contiv/v1/ipam: %d %s", code, body)
	}
	var info struct {
		NodeID uint32 `json:"nodeId"`
		Config struct {
			DualStack *struct {
				PodSubnetCIDR             string `json:"podSubnetCIDR"`
				PodSubnetOneNodePrefixLen int    `json:"podSubnetOneNodePrefixLen"`
			} `json:"dualStack"`
		} `json:"config"`
	}
	if err := json.Unmarshal(body, &info); err != nil {
		t.Fatalf("GET /contiv/v1/ipam: %v in %s", err, body)
	}
	if info.Config.DualStack == nil {
		t.Fatalf("GET /contiv/v1/ipam: no config.dualStack in %s", body)
	}
	all, err := netip.ParsePrefix(info.Config.DualStack.PodSubnetCIDR)
	if err != nil {
		t.Fatalf("config.dualStack.podSubnetCIDR: %v", err)
	}
	n.subnet6 = nthSubnet(all, info.Config.DualStack.PodSubnetOneNodePrefixLen, info.NodeID)
	n.gateway6 = n.subnet6.Addr().Next()
	t.Logf("node ID %d: pod subnets %s (gateway %s) and %s (gateway %s)", info.NodeID, n.subnet, n.gateway, n.subnet6, n.gateway6)
}

// nthSubnet is the n-th subnet of length bits inside all.
func nthSubnet(all netip.Prefix, bits int, n uint32) netip.Prefix {
	base := new(big.Int).SetBytes(all.Masked().Addr().AsSlice())
	base.Add(base, new(big.Int).Lsh(big.NewInt(int64(n)), uint(all.Addr().BitLen()-bits)))
	buf := make([]byte, all.Addr().BitLen()/8)
	base.FillBytes(buf)
	a, _ := netip.AddrFromSlice(buf)
	return netip.PrefixFrom(a, bits)
}

// family is the second family's view of n, for expectPodAddress.
func (n *dsNode) family6() *node {
	return &node{agent: n.agent, subnet: n.subnet6, gateway: n.gateway6}
}

// checkDualIPs asserts the ips and routes of a dual-stack result: the
// IPv4 address first (the primary family), then the IPv6 one, each with
// its family's gateway and, before 1.0.0, its version; one default route
// per family via its gateway. withInterface: the plugin form.
func (n *dsNode) checkDualIPs(g Gomega, version string, res map[string]any, withInterface bool) (v4, v6 netip.Prefix) {
	g.ExpectWithOffset(1, res).To(HaveKeyWithValue("cniVersion", version))
	ips, _ := res["ips"].([]any)
	g.ExpectWithOffset(1, ips).To(HaveLen(2), "ips of %v", res)
	var got [2]netip.Prefix
	for i, fam := range []struct {
		n       *node
		version string
	}{{n.node, "4"}, {n.family6(), "6"}} {
		ip, _ := ips[i].(map[string]any)
		if legacy(version) {
			g.ExpectWithOffset(1, ip).To(HaveKeyWithValue("version", fam.version), "ips[%d]", i)
		} else {
			g.ExpectWithOffset(1, ip).NotTo(HaveKey("version"), "ips[%d]", i)
		}
		if withInterface {
			g.ExpectWithOffset(1, ip).To(HaveKeyWithValue("interface", BeNumerically("==", 0)), "ips[%d]", i)
		} else {
			g.ExpectWithOffset(1, ip).NotTo(HaveKey("interface"), "ips[%d]", i)
		}
		g.ExpectWithOffset(1, ip).To(HaveKeyWithValue("gateway", fam.n.gateway.String()), "ips[%d]", i)
		addr, err := netip.ParsePrefix(fmt.Sprint(ip["address"]))
		g.ExpectWithOffset(1, err).NotTo(HaveOccurred(), "ips[%d]", i)
		fam.n.expectPodAddress(g, addr)
		got[i] = addr
	}
	g.ExpectWithOffset(1, res["routes"]).To(Equal([]any{
		map[string]any{"dst": "0.0.0.0/0", "gw": n.gateway.String()},
		map[string]any{"dst": "::/0", "gw": n.gateway6.String()},
	}), "routes of %v", res)
	return got[0], got[1]
}

// restAllocation is an entry of GET /contiv/v1/ipam/allocations with the
// fields of dual-stack and reservations (testenv.Allocation has neither).
type restAllocation struct {
	PodID struct {
		Name      string `json:"Name"`
		Namespace string `json:"Namespace"`
	} `json:"PodID"`
	MainIP              string   `json:"MainIP"`
	IPs                 []string `json:"IPs"`
	Network             string   `json:"network"`
	ContainerID         string   `json:"containerId"`
	IfName              string   `json:"ifName"`
	ReservationDeadline string   `json:"reservationDeadline"`
}

// addrs are every address of the allocation: IPs, or MainIP alone.
func (a restAllocation) addrs() []string {
	if len(a.IPs) > 0 {
		return a.IPs
	}
	return []string{a.MainIP}
}

// restAllocations reads GET /contiv/v1/ipam/allocations.
func restAllocations(t testing.TB, a *testenv.Agent) []restAllocation {
	t.Helper()
	code, body := a.Get(t, "/contiv/v1/ipam/allocations")
	if code != 200 {
		t.Fatalf("GET /contiv/v1/ipam/allocations: %d %s", code, body)
	}
	var out struct {
		Pods []restAllocation `json:"Pods"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("GET /contiv/v1/ipam/allocations: %v in %s", err, body)
	}
	return out.Pods
}

// restAllocationOf is the allocation of the key, if any.
func restAllocationOf(t testing.TB, a *testenv.Agent, network, containerID, ifName string) (restAllocation, bool) {
	t.Helper()
	for _, al := range restAllocations(t, a) {
		if al.Network == network && al.ContainerID == containerID && al.IfName == ifName {
			return al, true
		}
	}
	return restAllocation{}, false
}

// holders lists the allocations (any network) holding one of addrs.
func holders(t testing.TB, a *testenv.Agent, addrs ...netip.Prefix) []restAllocation {
	t.Helper()
	var out []restAllocation
	for _, al := range restAllocations(t, a) {
		for _, s := range al.addrs() {
			for _, p := range addrs {
				if s == p.Addr().String() {
					out = append(out, al)
				}
			}
		}
	}
	return out
}

// expectHeldConfirmed: the key holds exactly v4 and v6 (MainIP the IPv4
// one), confirmed (no reservation deadline: contiv-cni confirmed it).
func expectHeldConfirmed(t testing.TB, g Gomega, a *testenv.Agent, network string, rt *libcni.RuntimeConf, v4, v6 netip.Prefix) {
	t.Helper()
	al, ok := restAllocationOf(t, a, network, rt.ContainerID, rt.IfName)
	g.ExpectWithOffset(1, ok).To(BeTrue(), "allocation of %s in %v", rt.ContainerID, restAllocations(t, a))
	g.ExpectWithOffset(1, al.MainIP).To(Equal(v4.Addr().String()), "MainIP")
	g.ExpectWithOffset(1, al.IPs).To(Equal([]string{v4.Addr().String(), v6.Addr().String()}), "IPs")
	g.ExpectWithOffset(1, al.ReservationDeadline).To(BeEmpty(), "the ADD's reservation is confirmed")
}

// TestDualStack runs contiv-cni on an agent with ipamConfig.dualStack:
// every ADD returns an IPv4 and an IPv6 address, each with its gateway,
// and a default route per family, in every CNI version, through libcni
// and through cnitool; CHECK and DEL work and free both addresses. The
// ptp subtest configures both addresses in a network namespace and pings
// both gateways from inside.
func TestDualStack(t *testing.T) {
	n := startDualStack(t, "")
	for _, v := range versions {
		t.Run("libcni/"+v, func(t *testing.T) { n.libcniSequence(t, v) })
	}
	for _, v := range versions {
		t.Run("cnitool/"+v, func(t *testing.T) { n.cnitoolSequence(t, v) })
	}
	t.Run("ptp", n.ptpDualStack)
}

// libcniSequence: ADD, ADD again (same addresses), REST, CHECK, DEL
// (both addresses free), DEL again.
func (n *dsNode) libcniSequence(t *testing.T, version string) {
	g := NewWithT(t)
	ctx, rt := ctxT(t), newRuntime(t)
	name := uniqueName("ds")
	list := conflist(t, version, name, pluginMode(n.agent.Socket))
	att := attachment(t, "ds")

	res, err := rt.AddNetworkList(ctx, list, att)
	g.Expect(err).NotTo(HaveOccurred(), "ADD")
	m := resultJSON(t, res)
	g.Expect(m["interfaces"]).To(Equal([]any{map[string]any{"name": att.IfName, "sandbox": att.NetNS}}))
	v4, v6 := n.checkDualIPs(g, version, m, true)
	expectHeldConfirmed(t, g, n.agent, name, att, v4, v6)

	res, err = rt.AddNetworkList(ctx, list, att)
	g.Expect(err).NotTo(HaveOccurred(), "repeated ADD")
	a4, a6 := n.checkDualIPs(g, version, resultJSON(t, res), true)
	g.Expect([]netip.Prefix{a4, a6}).To(Equal([]netip.Prefix{v4, v6}), "repeated ADD, same key")

	if version == "0.3.1" {
		g.Expect(rt.CheckNetworkList(ctx, list, att)).To(MatchError(libcni.ErrorCheckNotSupp))
	} else {
		g.Expect(rt.CheckNetworkList(ctx, list, att)).To(Succeed(), "CHECK after ADD")
	}

	g.Expect(rt.DelNetworkList(ctx, list, att)).To(Succeed(), "DEL")
	g.Expect(holders(t, n.agent, v4, v6)).To(BeEmpty(), "holders of %s and %s after DEL", v4, v6)
	g.Expect(n.inNetwork(t, name)).To(BeEmpty())
	if version != "0.3.1" {
		expectCode(g, rt.CheckNetworkList(ctx, list, att), uint(103))
	}
	g.Expect(rt.DelNetworkList(ctx, list, att)).To(Succeed(), "DEL again")
}

// cnitoolSequence: the real cnitool, add, check (not in 0.3.1), del; both
// addresses are free after del.
func (n *dsNode) cnitoolSequence(t *testing.T, version string) {
	g := NewWithT(t)
	tool := newCNITool(t, version, pluginMode(n.agent.Socket))
	netns := netnsFile(t)
	rt := &libcni.RuntimeConf{ContainerID: cnitoolContainerID(netns), NetNS: netns, IfName: "eth0"}

	out, errOut, err := tool.run(t, "add", netns)
	g.Expect(err).NotTo(HaveOccurred(), "cnitool add: %s", errOut)
	v4, v6 := n.checkDualIPs(g, version, parseJSON(t, out), true)
	expectHeldConfirmed(t, g, n.agent, tool.network, rt, v4, v6)

	_, errOut, err = tool.run(t, "check", netns)
	if version == "0.3.1" {
		g.Expect(err).To(HaveOccurred(), "cnitool check in 0.3.1")
		g.Expect(errOut).To(ContainSubstring("does not support the CHECK command"))
	} else {
		g.Expect(err).NotTo(HaveOccurred(), "cnitool check: %s", errOut)
	}

	_, errOut, err = tool.run(t, "del", netns)
	g.Expect(err).NotTo(HaveOccurred(), "cnitool del: %s", errOut)
	g.Expect(holders(t, n.agent, v4, v6)).To(BeEmpty(), "holders of %s and %s after del", v4, v6)
	g.Expect(n.inNetwork(t, tool.network)).To(BeEmpty())
}
