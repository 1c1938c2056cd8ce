package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/invoke"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/podmanager/cni"
)

// TestAsDelegateOfInvoke drives contiv-cni the way ptp, bridge, macvlan
// and ipvlan do: through the CNI library's invoke.DelegateAdd/Check/Del,
// which parse and convert its output for every version.
func TestAsDelegateOfInvoke(t *testing.T) {
	t.Setenv("CNI_PATH", binDir)
	t.Setenv("CNI_CONTAINERID", testContainer)
	t.Setenv("CNI_NETNS", testNetns)
	t.Setenv("CNI_IFNAME", "eth0")
	t.Setenv("CNI_ARGS", testPodArgs)
	for _, ver := range allVersions {
		t.Run(ver, func(t *testing.T) {
			g := NewWithT(t)
			fa, sock := startAgent(t)
			ctx := context.Background()
			conf := []byte(ipamConf(ver, sock, ""))
			raw, err := invoke.DelegateAdd(ctx, PluginType, conf, nil)
			g.Expect(err).NotTo(HaveOccurred())
			res, err := types100.NewResultFromResult(raw)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.Interfaces).To(BeEmpty())
			g.Expect(res.IPs).To(HaveLen(1))
			g.Expect(res.IPs[0].Address.String()).To(Equal("10.1.5.2/24"))
			g.Expect(res.IPs[0].Gateway.String()).To(Equal("10.1.5.1"))
			g.Expect(res.IPs[0].Interface).To(BeNil())
			g.Expect(res.Routes).To(HaveLen(1))
			g.Expect(res.Routes[0].Dst.String()).To(Equal("0.0.0.0/0"))
			if ver != "0.3.1" {
				prev := fmt.Sprintf(`{"cniVersion":%q,"name":"ptp-net","type":"ptp","ipam":{"type":"contiv-cni","grpcServer":%q},"prevResult":%s}`,
					ver, sock, prevResultOf(ver))
				g.Expect(invoke.DelegateCheck(ctx, PluginType, []byte(prev), nil)).To(Succeed())
			}
			g.Expect(invoke.DelegateDel(ctx, PluginType, conf, nil)).To(Succeed())
			want := []string{"Add", "Check", "Delete"}
			if ver == "0.3.1" {
				want = []string{"Add", "Delete"}
			}
			g.Expect(fa.Calls()).To(Equal(want))
		})
	}
}

// ipv6Add is an Add reply with an IPv6 pod address.
func ipv6Add() *cni.CNIReply {
	return &cni.CNIReply{
		Interfaces: []*cni.CNIReply_Interface{{
			IpAddresses: []*cni.CNIReply_Interface_IP{{
				Version: cni.CNIReply_Interface_IP_IPV6, Address: "fd00:10:1:5::2/64", Gateway: "fd00:10:1:5::1",
			}},
		}},
		Routes: []*cni.CNIReply_Route{{Dst: "::/0", Gw: "fd00:10:1:5::1"}},
	}
}

func TestAddIPv6(t *testing.T) {
	for _, ver := range allVersions {
		t.Run(ver, func(t *testing.T) {
			g := NewWithT(t)
			fa, sock := startAgent(t)
			fa.set("Add", ipv6Add())
			out := run{Command: "ADD", Conf: ipamConf(ver, sock, "")}.mustSucceed(t)
			version := ""
			if strings.HasPrefix(ver, "0.") {
				version = `"version":"6",`
			}
			g.Expect(out).To(MatchJSON(fmt.Sprintf(`{"cniVersion":%q,
				"ips":[{%s"address":"fd00:10:1:5::2/64","gateway":"fd00:10:1:5::1"}],
				"routes":[{"dst":"::/0","gw":"fd00:10:1:5::1"}]%s}`, ver, version, dnsField(ver))))
		})
	}
}

func TestAddPassesDNS(t *testing.T) {
	g := NewWithT(t)
	fa, sock := startAgent(t)
	reply := okAdd()
	reply.Dns = []*cni.CNIReply_DNS{{
		Nameservers: []string{"10.96.0.10"}, Domain: "cluster.local",
		Search: []string{"default.svc.cluster.local"}, Options: []string{"ndots:5"},
	}}
	fa.set("Add", reply)
	out := run{Command: "ADD", Conf: ipamConf("1.0.0", sock, "")}.mustSucceed(t)
	g.Expect(out).To(MatchJSON(`{"cniVersion":"1.0.0",
		"ips":[{"address":"10.1.5.2/24","gateway":"10.1.5.1"}],
		"routes":[{"dst":"0.0.0.0/0","gw":"10.1.5.1"}],
		"dns":{"nameservers":["10.96.0.10"],"domain":"cluster.local","search":["default.svc.cluster.local"],"options":["ndots:5"]}}`))
}

// TestTCPServer: grpcServer may be host:port, as in Contiv.
func TestTCPServer(t *testing.T) {
	g := NewWithT(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	fa := serveFake(t, lis)
	run{Command: "ADD", Conf: pluginConf("1.0.0", lis.Addr().String(), "")}.mustSucceed(t)
	g.Expect(fa.Calls()).To(Equal([]string{"Add"}))
}

// TestLogFile: logs are appended to logFile, never printed on stdout; a
// logFile that cannot be opened does not fail the call.
func TestLogFile(t *testing.T) {
	t.Run("written", func(t *testing.T) {
		g := NewWithT(t)
		_, sock := startAgent(t)
		logPath := filepath.Join(t.TempDir(), "cni.log")
		g.Expect(os.WriteFile(logPath, []byte("earlier line\n"), 0o600)).To(Succeed())
		conf := pluginConf("1.0.0", sock, fmt.Sprintf(`,"logFile":%q`, logPath))
		out := run{Command: "ADD", Conf: conf}.mustSucceed(t)
		g.Expect(out).To(HavePrefix("{"))
		data, err := os.ReadFile(logPath)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(data)).To(HavePrefix("earlier line\n"))
		g.Expect(string(data)).To(ContainSubstring("msg=added"))
		g.Expect(string(data)).To(ContainSubstring(testContainer))
	})
	t.Run("failure logged", func(t *testing.T) {
		g := NewWithT(t)
		logPath := filepath.Join(t.TempDir(), "cni.log")
		conf := pluginConf("1.0.0", filepath.Join(shortDir(t), "absent.sock"), fmt.Sprintf(`,"logFile":%q`, logPath))
		run{Command: "DEL", Conf: conf}.mustFail(t)
		data, err := os.ReadFile(logPath)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(data)).To(ContainSubstring("level=ERROR"))
		g.Expect(string(data)).To(ContainSubstring("absent.sock"))
	})
	t.Run("unopenable", func(t *testing.T) {
		g := NewWithT(t)
		_, sock := startAgent(t)
		logPath := filepath.Join(t.TempDir(), "no-such-dir", "cni.log")
		conf := pluginConf("1.0.0", sock, fmt.Sprintf(`,"logFile":%q`, logPath))
		o := run{Command: "ADD", Conf: conf}.exec(t)
		g.Expect(o.ExitErr).To(BeFalse(), "stdout %s", o.Stdout)
		g.Expect(o.Stderr).To(ContainSubstring("logFile"))
		g.Expect(o.Stderr).To(ContainSubstring(logPath))
	})
}

// TestNoAboutOnStdout: run without CNI_COMMAND, the binary prints its
// version on stderr and nothing on stdout.
func TestNoAboutOnStdout(t *testing.T) {
	g := NewWithT(t)
	o := run{Env: map[string]string{"CNI_COMMAND": ""}}.exec(t)
	g.Expect(o.ExitErr).To(BeFalse())
	g.Expect(o.Stdout).To(BeEmpty())
	g.Expect(o.Stderr).To(ContainSubstring("contiv-cni"))
	g.Expect(o.Stderr).To(ContainSubstring("0.3.1, 0.4.0, 1.0.0, 1.1.0"))
}

// TestAsDelegateOfInvokeDualStack: ptp, bridge, macvlan and ipvlan get
// both addresses and both default routes of a dual-stack reply through
// invoke.DelegateAdd in every version, and contiv-cni confirmed the
// reservation before they could read them.
func TestAsDelegateOfInvokeDualStack(t *testing.T) {
	t.Setenv("CNI_PATH", binDir)
	t.Setenv("CNI_CONTAINERID", testContainer)
	t.Setenv("CNI_NETNS", testNetns)
	t.Setenv("CNI_IFNAME", "eth0")
	t.Setenv("CNI_ARGS", testPodArgs)
	for _, ver := range allVersions {
		t.Run(ver, func(t *testing.T) {
			g := NewWithT(t)
			fa, sock := startAgent(t)
			reply := dualStackReply(dualStackOrders[0].ips, dualStackOrders[0].routes)
			reply.Reservation = "res-1"
			fa.set("Add", reply)
			raw, err := invoke.DelegateAdd(context.Background(), PluginType, []byte(ipamConf(ver, sock, "")), nil)
			g.Expect(err).NotTo(HaveOccurred())
			res, err := types100.NewResultFromResult(raw)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.IPs).To(HaveLen(2))
			g.Expect(res.IPs[0].Address.String()).To(Equal("10.1.5.2/24"))
			g.Expect(res.IPs[0].Gateway.String()).To(Equal("10.1.5.1"))
			g.Expect(res.IPs[1].Address.String()).To(Equal("fd00:10:1:5::2/64"))
			g.Expect(res.IPs[1].Gateway.String()).To(Equal("fd00:10:1:5::1"))
			g.Expect(res.Routes).To(HaveLen(2))
			g.Expect(res.Routes[0].Dst.String()).To(Equal("0.0.0.0/0"))
			g.Expect(res.Routes[1].Dst.String()).To(Equal("::/0"))
			g.Expect(res.Routes[1].GW.String()).To(Equal("fd00:10:1:5::1"))
			g.Expect(fa.Calls()).To(Equal([]string{"Add", "Confirm"}))
		})
	}
}
