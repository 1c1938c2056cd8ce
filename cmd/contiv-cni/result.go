package main

import (
	"bytes"
	"fmt"
	"net"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"

	"github.com/contiv-ipam/agent/plugins/podmanager/cni"
)

// replyError is the error of an agent reply contiv-cni cannot turn into a
// result (a bug of the agent): code 100, naming the field and the value.
func replyError(field, value, reason string) *types.Error {
	return types.NewError(uint(cni.CodeInternal),
		fmt.Sprintf("agent reply: %s %q: %s", field, value, reason), "")
}

// toResult builds the CNI result of an ADD from the agent's reply. In
// plugin mode it has one interface (CNI_IFNAME in CNI_NETNS) and every
// address points at it (ips[].interface 0); in IPAM mode it is the
// abbreviated IPAM result: no interfaces, no ips[].interface.
//
// Dual-stack: every address of the reply is kept, in the reply's order
// (an IPv4 and an IPv6 one, either first), each with the gateway of its
// own family, and every route (0.0.0.0/0 via the IPv4 gateway, ::/0 via
// the IPv6 one). A gateway of another family than its address or route
// is a bad reply.
//
// The result is in the library's current version; formatResult converts
// it to the call's version (0.3.1 and 0.4.0 add ips[].version, "4" or "6"
// from each address). Building it with the call's version would skip
// that conversion.
func toResult(reply *cni.CNIReply, mode Mode, args *skel.CmdArgs) (*types100.Result, error) {
	res := &types100.Result{CNIVersion: types100.ImplementedSpecVersion}
	var iface *int
	if mode == ModePlugin {
		res.Interfaces = []*types100.Interface{{
			Name:    args.IfName,
			Sandbox: args.Netns,
			Mac:     firstMAC(reply),
		}}
		iface = types100.Int(0)
	}
	ips, err := toIPs(reply, iface)
	if err != nil {
		return nil, err
	}
	if len(ips) == 0 {
		return nil, replyError("interfaces[].ip_addresses", "", "no address in a successful reply")
	}
	res.IPs = ips
	if res.Routes, err = toRoutes(reply.GetRoutes()); err != nil {
		return nil, err
	}
	if dns := reply.GetDns(); len(dns) > 0 {
		res.DNS = types.DNS{
			Nameservers: dns[0].GetNameservers(),
			Domain:      dns[0].GetDomain(),
			Search:      dns[0].GetSearch(),
			Options:     dns[0].GetOptions(),
		}
	}
	return res, nil
}

func firstMAC(reply *cni.CNIReply) string {
	for _, i := range reply.GetInterfaces() {
		if i.GetMac() != "" {
			return i.GetMac()
		}
	}
	return ""
}

func toIPs(reply *cni.CNIReply, iface *int) ([]*types100.IPConfig, error) {
	var ips []*types100.IPConfig
	for i, ifc := range reply.GetInterfaces() {
		for j, ip := range ifc.GetIpAddresses() {
			field := fmt.Sprintf("interfaces[%d].ip_addresses[%d]", i, j)
			addr, err := types.ParseCIDR(ip.GetAddress())
			if err != nil {
				return nil, replyError(field+".address", ip.GetAddress(), "not a CIDR")
			}
			cfg := &types100.IPConfig{Address: *addr, Interface: iface}
			if gw := ip.GetGateway(); gw != "" {
				if cfg.Gateway = net.ParseIP(gw); cfg.Gateway == nil {
					return nil, replyError(field+".gateway", gw, "not an IP address")
				}
				if !sameFamily(cfg.Gateway, addr.IP) {
					return nil, replyError(field+".gateway", gw, "not of the family of address "+ip.GetAddress())
				}
			}
			ips = append(ips, cfg)
		}
	}
	return ips, nil
}

func toRoutes(routes []*cni.CNIReply_Route) ([]*types.Route, error) {
	var out []*types.Route
	for i, r := range routes {
		field := fmt.Sprintf("routes[%d]", i)
		_, dst, err := net.ParseCIDR(r.GetDst())
		if err != nil {
			return nil, replyError(field+".dst", r.GetDst(), "not a CIDR")
		}
		route := &types.Route{Dst: *dst}
		if gw := r.GetGw(); gw != "" {
			if route.GW = net.ParseIP(gw); route.GW == nil {
				return nil, replyError(field+".gw", gw, "not an IP address")
			}
			if !sameFamily(route.GW, dst.IP) {
				return nil, replyError(field+".gw", gw, "not of the family of dst "+r.GetDst())
			}
		}
		out = append(out, route)
	}
	return out, nil
}

// sameFamily tells whether a and b are both IPv4 or both IPv6.
func sameFamily(a, b net.IP) bool { return (a.To4() == nil) == (b.To4() == nil) }

// formatResult is res converted to the call's version, as the CNI library
// prints it (types.PrintResult's conversion and JSON): everything that
// can fail about a result fails here, before anything is confirmed or
// printed.
func formatResult(res *types100.Result, version string) ([]byte, error) {
	out, err := res.GetAsVersion(version)
	if err != nil {
		return nil, fmt.Errorf("converting the result to CNI version %q: %w", version, err)
	}
	var buf bytes.Buffer
	if err := out.PrintTo(&buf); err != nil {
		return nil, fmt.Errorf("encoding the result: %w", err)
	}
	return buf.Bytes(), nil
}

// prevIPs are the addresses (CIDR) of the call's prevResult, whatever
// its version; none without a prevResult.
func prevIPs(conf *Config) ([]string, error) {
	if conf.NetConf.RawPrevResult == nil {
		return nil, nil
	}
	nc := conf.NetConf
	if err := parsePrevResult(&nc); err != nil {
		return nil, err
	}
	res, err := types100.NewResultFromResult(nc.PrevResult)
	if err != nil {
		return nil, confError("prevResult", "", err.Error())
	}
	out := make([]string, 0, len(res.IPs))
	for _, ip := range res.IPs {
		out = append(out, ip.Address.String())
	}
	return out, nil
}
