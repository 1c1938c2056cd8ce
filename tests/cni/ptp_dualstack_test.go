package cni

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	. "github.com/onsi/gomega"
)

// nsExec runs every plugin libcni executes inside the network namespace
// ns (`ip netns exec`): ptp then puts the host end of its veth, the
// gateway addresses, the host routes and the forwarding sysctls into
// that namespace, which the test created, and not into the machine's.
type nsExec struct {
	invoke.RawExec        // FindInPath
	version.PluginDecoder // Decode
	ns                    string
}

var _ invoke.Exec = (*nsExec)(nil)

// ExecPlugin implements invoke.Exec like invoke.RawExec, through ip
// netns exec: a plugin's CNI error (JSON on stdout) is returned as a
// *types.Error.
func (e *nsExec) ExecPlugin(ctx context.Context, pluginPath string, stdin []byte, environ []string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	c := exec.CommandContext(ctx, "ip", "netns", "exec", e.ns, pluginPath)
	c.Env, c.Stdin, c.Stdout, c.Stderr = environ, bytes.NewReader(stdin), &stdout, &stderr
	if err := c.Run(); err != nil {
		var perr types.Error
		if json.Unmarshal(stdout.Bytes(), &perr) == nil && perr.Code != 0 {
			return nil, &perr
		}
		return nil, fmt.Errorf("ip netns exec %s %s: %w: stdout %q, stderr %q", e.ns, filepath.Base(pluginPath), err, stdout.Bytes(), stderr.Bytes())
	}
	return stdout.Bytes(), nil
}

// newNamespace creates a network namespace unique to the test, with lo
// up and IPv6 enabled without duplicate address detection on every
// interface created in (or moved into) it, and deletes it, with whatever
// it holds, at the end.
func newNamespace(t *testing.T, prefix string) (name, path string) {
	t.Helper()
	name = uniqueName(prefix)
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s (the suite runs as root)", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	nsRun(t, name, "ip", "link", "set", "lo", "up")
	// /proc/sys/net is the namespace's own inside ip netns exec.
	nsRun(t, name, "sh", "-c", "for c in all default; do echo 0 >/proc/sys/net/ipv6/conf/$c/disable_ipv6 && "+
		"echo 0 >/proc/sys/net/ipv6/conf/$c/accept_dad || exit 1; done")
	return name, filepath.Join("/var/run/netns", name)
}

// nsRun runs a command inside the namespace; the test fails when it does.
func nsRun(t *testing.T, ns string, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", append([]string{"netns", "exec", ns}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip netns exec %s %s: %v: %s", ns, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// globalAddrs are the global-scope addresses (with length) of a device
// in a namespace, both families.
func globalAddrs(t *testing.T, ns, dev string) ([]string, error) {
	t.Helper()
	links, err := ipJSON(t, "-n", ns, "addr", "show", "dev", dev, "scope", "global")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range links {
		infos, _ := l["addr_info"].([]any)
		for _, i := range infos {
			info, _ := i.(map[string]any)
			if _, ok := info["local"]; ok { // ip -j keeps an empty entry per address filtered out
				out = append(out, fmt.Sprintf("%v/%v", info["local"], info["prefixlen"]))
			}
		}
	}
	return out, nil
}

// ptpDualStack: Debian's ptp, run in a "host" namespace the test
// creates, delegates IPAM to contiv-cni for a pod namespace: eth0 in the
// pod carries both addresses, the host end of the veth both gateways
// (ptp's layout), and the pod pings the IPv4 and the IPv6 gateway. CHECK
// passes; DEL removes eth0 and frees both addresses.
func (n *dsNode) ptpDualStack(t *testing.T) {
	g := NewWithT(t)
	host, _ := newNamespace(t, "contiv-cnihost")
	pod, podPath := newNamespace(t, "contiv-cnipod")
	rt := libcni.NewCNIConfigWithCacheDir(cniPath(), t.TempDir(), &nsExec{ns: host})
	name := uniqueName("ptp-ds")
	list := conflist(t, "1.0.0", name, map[string]any{"type": "ptp", "ipMasq": false,
		"ipam": map[string]any{"type": "contiv-cni", "grpcServer": n.agent.Socket}})
	att := &libcni.RuntimeConf{ContainerID: uniqueName("ptp-ds-ctr"), NetNS: podPath, IfName: "eth0"}
	ctx := ctxT(t)

	res, err := rt.AddNetworkList(ctx, list, att)
	g.Expect(err).NotTo(HaveOccurred(), "ADD through ptp")
	r, err := types100.NewResultFromResult(res)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.IPs).To(HaveLen(2), "ptp result %v", r)
	g.Expect(r.Interfaces).To(HaveLen(2), "ptp result: host veth and eth0")
	hostVeth := r.Interfaces[0].Name
	var got []netip.Prefix
	for i, fam := range []*node{n.node, n.family6()} {
		p, err := netip.ParsePrefix(r.IPs[i].Address.String())
		g.Expect(err).NotTo(HaveOccurred())
		fam.expectPodAddress(g, p)
		g.Expect(r.IPs[i].Gateway.String()).To(Equal(fam.gateway.String()), "ips[%d].gateway", i)
		got = append(got, p)
	}
	v4, v6 := got[0], got[1]
	t.Logf("%s: eth0 %s and %s; gateways %s and %s on %s in %s", pod, v4, v6, n.gateway, n.gateway6, hostVeth, host)

	g.Expect(globalAddrs(t, pod, "eth0")).To(ConsistOf(v4.String(), v6.String()), "eth0 inside %s", pod)
	g.Expect(globalAddrs(t, host, hostVeth)).To(ConsistOf(n.gateway.String()+"/32", n.gateway6.String()+"/128"),
		"the host end %s in %s", hostVeth, host)
	expectHeldConfirmed(t, g, n.agent, name, att, v4, v6)
	routes := nsRun(t, pod, "ip", "-6", "route", "show", "default")
	g.Expect(routes).To(ContainSubstring("via "+n.gateway6.String()), "IPv6 default route in %s", pod)

	for _, gw := range []netip.Addr{n.gateway, n.gateway6} {
		out, err := exec.Command("ip", "netns", "exec", pod, "ping", "-c", "1", "-W", "2", gw.String()).CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "ping of the gateway %s from inside %s: %s", gw, pod, out)
		g.Expect(string(out)).To(ContainSubstring("1 received"), "ping %s", gw)
	}

	g.Expect(rt.CheckNetworkList(ctx, list, att)).To(Succeed(), "CHECK through ptp")
	g.Expect(rt.DelNetworkList(ctx, list, att)).To(Succeed(), "DEL through ptp")
	_, err = globalAddrs(t, pod, "eth0")
	g.Expect(err).To(MatchError(ContainSubstring("does not exist")), "eth0 after DEL")
	_, err = globalAddrs(t, host, hostVeth)
	g.Expect(err).To(MatchError(ContainSubstring("does not exist")), "host veth %s after DEL", hostVeth)
	g.Expect(holders(t, n.agent, v4, v6)).To(BeEmpty(), "holders of %s and %s after DEL", v4, v6)
	g.Expect(rt.DelNetworkList(ctx, list, att)).To(Succeed(), "DEL again")
}
