package main

import (
	"errors"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/podmanager/cni"
)

// TestToResultRejectsBadReplies: a reply contiv-cni cannot print is code
// 100 naming the field and the value, never a panic or a half result.
func TestToResultRejectsBadReplies(t *testing.T) {
	ip := func(addr, gw string) *cni.CNIReply {
		return &cni.CNIReply{Interfaces: []*cni.CNIReply_Interface{{
			IpAddresses: []*cni.CNIReply_Interface_IP{{Address: addr, Gateway: gw}}}}}
	}
	withRoute := func(dst, gw string) *cni.CNIReply {
		r := ip("10.1.5.2/24", "10.1.5.1")
		r.Routes = []*cni.CNIReply_Route{{Dst: dst, Gw: gw}}
		return r
	}
	cases := []struct {
		name  string
		reply *cni.CNIReply
		want  []string
	}{
		{"no interfaces", &cni.CNIReply{}, []string{"ip_addresses", "no address"}},
		{"interface without address", &cni.CNIReply{Interfaces: []*cni.CNIReply_Interface{{Name: "eth0"}}}, []string{"no address"}},
		{"address without length", ip("10.1.5.2", ""), []string{"interfaces[0].ip_addresses[0].address", `"10.1.5.2"`}},
		{"bad gateway", ip("10.1.5.2/24", "10.1.5"), []string{"interfaces[0].ip_addresses[0].gateway", `"10.1.5"`}},
		{"bad route dst", withRoute("default", ""), []string{"routes[0].dst", `"default"`}},
		{"bad route gw", withRoute("0.0.0.0/0", "gw"), []string{"routes[0].gw", `"gw"`}},
	}
	args := &skel.CmdArgs{IfName: "eth0", Netns: "/n"}
	for _, tc := range cases {
		for _, mode := range []Mode{ModePlugin, ModeIPAM} {
			t.Run(tc.name+"/"+mode.String(), func(t *testing.T) {
				g := NewWithT(t)
				res, err := toResult(tc.reply, mode, args)
				g.Expect(res).To(BeNil())
				var cniErr *types.Error
				g.Expect(errors.As(err, &cniErr)).To(BeTrue())
				g.Expect(cniErr.Code).To(BeEquivalentTo(cni.CodeInternal))
				for _, w := range tc.want {
					g.Expect(cniErr.Msg).To(ContainSubstring(w))
				}
			})
		}
	}
}

// TestToResultRouteWithoutGateway: a route without gw stays without one
// (an on-link route), and every address of the reply is kept.
func TestToResultRouteWithoutGateway(t *testing.T) {
	g := NewWithT(t)
	reply := okAdd()
	reply.Interfaces[0].IpAddresses = append(reply.Interfaces[0].IpAddresses,
		&cni.CNIReply_Interface_IP{Version: cni.CNIReply_Interface_IP_IPV6, Address: "fd00::2/64", Gateway: "fd00::1"})
	reply.Routes = append(reply.Routes, &cni.CNIReply_Route{Dst: "10.96.0.0/12"})
	res, err := toResult(reply, ModePlugin, &skel.CmdArgs{IfName: "net1", Netns: "/n"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Interfaces).To(HaveLen(1))
	g.Expect(res.Interfaces[0].Name).To(Equal("net1"))
	g.Expect(res.IPs).To(HaveLen(2))
	g.Expect(*res.IPs[1].Interface).To(Equal(0))
	g.Expect(res.IPs[1].Address.String()).To(Equal("fd00::2/64"))
	g.Expect(res.Routes).To(HaveLen(2))
	g.Expect(res.Routes[1].Dst.String()).To(Equal("10.96.0.0/12"))
	g.Expect(res.Routes[1].GW).To(BeNil())
}
