package cni

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/tests/testenv"
)

// ipJSON runs `ip -j <args>` and decodes its output.
func ipJSON(t *testing.T, args ...string) ([]map[string]any, error) {
	t.Helper()
	out, err := exec.Command("ip", append([]string{"-j"}, args...)...).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("ip -j %s: %w: %s", strings.Join(args, " "), err, out)
	}
	var v []map[string]any
	if err := json.Unmarshal(out, &v); err != nil {
		return nil, fmt.Errorf("ip -j %s: %w in %s", strings.Join(args, " "), err, out)
	}
	return v, nil
}

// nsAddresses are the IPv4 addresses (with length) of a device in a netns.
func nsAddresses(t *testing.T, ns, dev string) ([]string, error) {
	t.Helper()
	links, err := ipJSON(t, "-n", ns, "-4", "addr", "show", "dev", dev)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range links {
		infos, _ := l["addr_info"].([]any)
		for _, i := range infos {
			info, _ := i.(map[string]any)
			out = append(out, fmt.Sprintf("%v/%v", info["local"], info["prefixlen"]))
		}
	}
	return out, nil
}

// TestPTPInNetns: Debian's ptp delegates IPAM to contiv-cni (IPAM mode) in
// a real network namespace: the veth inside carries the agent's address,
// the gateway (ptp puts it on the host end) answers ping from inside,
// CHECK passes, and DEL removes both veth ends and the allocation. ptp
// runs in a "host" namespace the test creates too (nsExec), so the host
// end, the gateway address, the routes and ip_forward stay out of the
// machine's own namespace. TestOracle runs the same round trip with
// host-local.
func TestPTPInNetns(t *testing.T) {
	n := startNode(t, testenv.Options{Conf: map[string]string{"contiv.conf": routedConf(t)}})
	ipam := map[string]any{"type": "contiv-cni", "grpcServer": n.agent.Socket}
	ptpRoundTrip(t, ipam, n.subnet, func(g Gomega, network string, rt *libcni.RuntimeConf, addr netip.Addr, held bool) {
		a, ok := n.allocationOf(t, network, rt)
		g.ExpectWithOffset(1, ok).To(Equal(held), "allocation of %s", rt.ContainerID)
		if held {
			g.ExpectWithOffset(1, a.Addr()).To(Equal(addr.String()))
		}
	})
}

// heldFunc asserts whether the IPAM plugin holds the address of the key.
type heldFunc func(g Gomega, network string, rt *libcni.RuntimeConf, addr netip.Addr, held bool)

// ptpRoundTrip: ADD through ptp (run in a new host namespace) with the
// ipam section into a new pod namespace, the address on eth0 and the
// gateway on the host end, ping of the gateway, CHECK, DEL, DEL again.
func ptpRoundTrip(t *testing.T, ipam map[string]any, subnet netip.Prefix, held heldFunc) {
	t.Helper()
	g := NewWithT(t)
	gateway := subnet.Addr().Next()
	host, _ := newNamespace(t, "contiv-cnihost")
	ns, nsPath := newNamespace(t, "contiv-cnitest")
	name := uniqueName("ptp")
	list := conflist(t, "1.0.0", name, map[string]any{"type": "ptp", "ipMasq": false, "ipam": ipam})
	ctx, rt := ctxT(t), libcni.NewCNIConfigWithCacheDir(cniPath(), t.TempDir(), &nsExec{ns: host})
	att := &libcni.RuntimeConf{ContainerID: uniqueName("ptp-ctr"), NetNS: nsPath, IfName: "eth0"}

	res, err := rt.AddNetworkList(ctx, list, att)
	g.Expect(err).NotTo(HaveOccurred(), "ADD through ptp")
	r, err := types100.NewResultFromResult(res)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.IPs).To(HaveLen(1), "ptp result %v", r)
	g.Expect(r.Interfaces).To(HaveLen(2), "ptp result: host veth and eth0")
	hostVeth := r.Interfaces[0].Name
	addr, ok := netip.AddrFromSlice(r.IPs[0].Address.IP.To4())
	g.Expect(ok).To(BeTrue())
	ones, _ := r.IPs[0].Address.Mask.Size()
	pod := netip.PrefixFrom(addr, ones)
	g.Expect(ones).To(Equal(subnet.Bits()), "prefix length of %s", pod)
	g.Expect(subnet.Contains(addr)).To(BeTrue(), "%s in %s", pod, subnet)
	g.Expect(r.IPs[0].Gateway.String()).To(Equal(gateway.String()))

	t.Logf("%s: eth0 %s, gateway %s on the host end %s in %s", ns, pod, gateway, hostVeth, host)
	g.Expect(nsAddresses(t, ns, "eth0")).To(Equal([]string{pod.String()}), "eth0 inside %s", ns)
	g.Expect(nsAddresses(t, host, hostVeth)).To(Equal([]string{gateway.String() + "/32"}), "the host end in %s", host)
	held(g, name, att, addr, true)

	ping := exec.Command("ip", "netns", "exec", ns, "ping", "-c", "3", "-W", "1", gateway.String())
	out, err := ping.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "ping of the gateway from inside %s: %s", ns, out)
	g.Expect(string(out)).To(ContainSubstring("3 received"))

	g.Expect(rt.CheckNetworkList(ctx, list, att)).To(Succeed(), "CHECK through ptp")

	g.Expect(rt.DelNetworkList(ctx, list, att)).To(Succeed(), "DEL through ptp")
	_, err = nsAddresses(t, ns, "eth0")
	g.Expect(err).To(MatchError(ContainSubstring("does not exist")), "eth0 after DEL")
	_, err = ipJSON(t, "-n", host, "link", "show", "dev", hostVeth)
	g.Expect(err).To(MatchError(ContainSubstring("does not exist")), "host veth %s after DEL", hostVeth)
	held(g, name, att, addr, false)
	g.Expect(rt.DelNetworkList(ctx, list, att)).To(Succeed(), "DEL again")
}
