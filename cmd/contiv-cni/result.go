package main

import (
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
// address points at it; in IPAM mode it is the abbreviated IPAM result:
// no interfaces, no ips[].interface.
//
// The result is in the library's current version; types.PrintResult
// converts it to the call's version (0.3.1 and 0.4.0 add ips[].version).
// Building it with the call's version would skip that conversion.
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
		}
		out = append(out, route)
	}
	return out, nil
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
