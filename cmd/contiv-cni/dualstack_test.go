package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	cniversion "github.com/containernetworking/cni/pkg/version"
	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/podmanager/cni"
)

// A dual-stack pod: one address per family, each with its gateway, and a
// default route per family.
var (
	v4Addr = &cni.CNIReply_Interface_IP{Version: cni.CNIReply_Interface_IP_IPV4, Address: "10.1.5.2/24", Gateway: "10.1.5.1"}
	v6Addr = &cni.CNIReply_Interface_IP{Version: cni.CNIReply_Interface_IP_IPV6, Address: "fd00:10:1:5::2/64", Gateway: "fd00:10:1:5::1"}
	v4Dflt = &cni.CNIReply_Route{Dst: "0.0.0.0/0", Gw: "10.1.5.1"}
	v6Dflt = &cni.CNIReply_Route{Dst: "::/0", Gw: "fd00:10:1:5::1"}
)

// dualStackOrders are the two orders an agent may list the families in.
var dualStackOrders = []struct {
	name   string
	ips    []*cni.CNIReply_Interface_IP
	routes []*cni.CNIReply_Route
}{
	{"IPv4+IPv6", []*cni.CNIReply_Interface_IP{v4Addr, v6Addr}, []*cni.CNIReply_Route{v4Dflt, v6Dflt}},
	{"IPv6+IPv4", []*cni.CNIReply_Interface_IP{v6Addr, v4Addr}, []*cni.CNIReply_Route{v6Dflt, v4Dflt}},
}

// dualStackReply is the agent's Add reply with ips and routes.
func dualStackReply(ips []*cni.CNIReply_Interface_IP, routes []*cni.CNIReply_Route) *cni.CNIReply {
	return &cni.CNIReply{
		Interfaces: []*cni.CNIReply_Interface{{Name: "eth0", IpAddresses: ips}},
		Routes:     routes,
	}
}

// wantResult is the JSON a result of ips and routes must print as in
// version ver and mode: ips[].version ("4"/"6", from the address) before
// 1.0.0; ips[].interface 0 and the interface in plugin mode; the empty
// dns object that 0.x results always carry.
func wantResult(ver string, mode Mode, ips []*cni.CNIReply_Interface_IP, routes []*cni.CNIReply_Route) string {
	var ipJSON, routeJSON []string
	for _, ip := range ips {
		fields := []string{}
		if strings.HasPrefix(ver, "0.") {
			family := "4"
			if ip.GetVersion() == cni.CNIReply_Interface_IP_IPV6 {
				family = "6"
			}
			fields = append(fields, fmt.Sprintf(`"version":%q`, family))
		}
		if mode == ModePlugin {
			fields = append(fields, `"interface":0`)
		}
		fields = append(fields, fmt.Sprintf(`"address":%q,"gateway":%q`, ip.GetAddress(), ip.GetGateway()))
		ipJSON = append(ipJSON, "{"+strings.Join(fields, ",")+"}")
	}
	for _, r := range routes {
		routeJSON = append(routeJSON, fmt.Sprintf(`{"dst":%q,"gw":%q}`, r.GetDst(), r.GetGw()))
	}
	itf := ""
	if mode == ModePlugin {
		itf = fmt.Sprintf(`"interfaces":[{"name":"eth0","sandbox":%q}],`, testNetns)
	}
	return fmt.Sprintf(`{"cniVersion":%q,%s"ips":[%s],"routes":[%s]%s}`,
		ver, itf, strings.Join(ipJSON, ","), strings.Join(routeJSON, ","), dnsField(ver))
}

// TestDualStackResult converts and prints a dual-stack reply in every
// supported version, both modes and both orders: both addresses (each
// with its gateway, its version before 1.0.0, interface 0 in plugin
// mode) and both default routes, in the reply's order. The printed JSON
// is also read back with the CNI library, as a runtime reads it.
func TestDualStackResult(t *testing.T) {
	args := &skel.CmdArgs{IfName: "eth0", Netns: testNetns}
	for _, ver := range SupportedVersions {
		for _, mode := range []Mode{ModePlugin, ModeIPAM} {
			for _, order := range dualStackOrders {
				t.Run(ver+"/"+mode.String()+"/"+order.name, func(t *testing.T) {
					g := NewWithT(t)
					res, err := toResult(dualStackReply(order.ips, order.routes), mode, args)
					g.Expect(err).NotTo(HaveOccurred())
					out, err := formatResult(res, ver)
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(string(out)).To(MatchJSON(wantResult(ver, mode, order.ips, order.routes)))

					raw, err := cniversion.NewResult(ver, out)
					g.Expect(err).NotTo(HaveOccurred())
					back, err := types100.NewResultFromResult(raw)
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(back.IPs).To(HaveLen(2))
					for i, ip := range back.IPs {
						g.Expect(ip.Address.String()).To(Equal(order.ips[i].GetAddress()))
						g.Expect(ip.Gateway.String()).To(Equal(order.ips[i].GetGateway()))
						if mode == ModePlugin {
							g.Expect(ip.Interface).To(Equal(types100.Int(0)))
						} else {
							g.Expect(ip.Interface).To(BeNil())
						}
					}
					g.Expect(back.Routes).To(HaveLen(2))
					for i, r := range back.Routes {
						g.Expect(r.Dst.String()).To(Equal(order.routes[i].GetDst()))
						g.Expect(r.GW.String()).To(Equal(order.routes[i].GetGw()))
					}
				})
			}
		}
	}
}

// TestAddDualStack runs the binary on a dual-stack reply in every version,
// both modes and both orders: what the runtime (or ptp) reads on stdout.
func TestAddDualStack(t *testing.T) {
	for _, ver := range allVersions {
		for _, order := range dualStackOrders {
			for _, mode := range []Mode{ModePlugin, ModeIPAM} {
				t.Run(ver+"/"+mode.String()+"/"+order.name, func(t *testing.T) {
					g := NewWithT(t)
					fa, sock := startAgent(t)
					fa.set("Add", dualStackReply(order.ips, order.routes))
					conf := pluginConf(ver, sock, "")
					if mode == ModeIPAM {
						conf = ipamConf(ver, sock, "")
					}
					out := run{Command: "ADD", Conf: conf}.mustSucceed(t)
					g.Expect(out).To(MatchJSON(wantResult(ver, mode, order.ips, order.routes)))
				})
			}
		}
	}
}

// TestSupportedVersionsAreTheTestedOnes: the binary tests cover exactly
// the versions contiv-cni announces (0.3.0 and 0.2.0 are refused by skel
// with code 1, see TestErrorCodes).
func TestSupportedVersionsAreTheTestedOnes(t *testing.T) {
	g := NewWithT(t)
	g.Expect(SupportedVersions).To(Equal(allVersions))
}

// TestToResultRejectsMixedFamilies: a gateway of another family than its
// address, or than its route's destination, is a bad reply (code 100
// naming the field), never a result a runtime would fail to apply.
func TestToResultRejectsMixedFamilies(t *testing.T) {
	cases := []struct {
		name  string
		reply *cni.CNIReply
		want  []string
	}{
		{"IPv4 address, IPv6 gateway", dualStackReply([]*cni.CNIReply_Interface_IP{
			{Address: "10.1.5.2/24", Gateway: "fd00:10:1:5::1"}}, nil),
			[]string{"interfaces[0].ip_addresses[0].gateway", `"fd00:10:1:5::1"`, "10.1.5.2/24"}},
		{"IPv6 address, IPv4 gateway", dualStackReply([]*cni.CNIReply_Interface_IP{
			v4Addr, {Address: "fd00:10:1:5::2/64", Gateway: "10.1.5.1"}}, nil),
			[]string{"interfaces[0].ip_addresses[1].gateway", `"10.1.5.1"`}},
		{"IPv6 default route via IPv4", dualStackReply([]*cni.CNIReply_Interface_IP{v4Addr, v6Addr},
			[]*cni.CNIReply_Route{v4Dflt, {Dst: "::/0", Gw: "10.1.5.1"}}),
			[]string{"routes[1].gw", `"10.1.5.1"`, "::/0"}},
		{"IPv4 default route via IPv6", dualStackReply([]*cni.CNIReply_Interface_IP{v4Addr, v6Addr},
			[]*cni.CNIReply_Route{{Dst: "0.0.0.0/0", Gw: "fd00:10:1:5::1"}}),
			[]string{"routes[0].gw", `"fd00:10:1:5::1"`}},
	}
	args := &skel.CmdArgs{IfName: "eth0", Netns: "/n"}
	for _, tc := range cases {
		for _, mode := range []Mode{ModePlugin, ModeIPAM} {
			t.Run(tc.name+"/"+mode.String(), func(t *testing.T) {
				g := NewWithT(t)
				res, err := toResult(tc.reply, mode, args)
				g.Expect(res).To(BeNil())
				var cniErr *types.Error
				g.Expect(errors.As(err, &cniErr)).To(BeTrue(), "%v", err)
				g.Expect(cniErr.Code).To(BeEquivalentTo(cni.CodeInternal))
				for _, w := range tc.want {
					g.Expect(cniErr.Msg).To(ContainSubstring(w))
				}
			})
		}
	}
}
