package cni

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	. "github.com/onsi/gomega"

	cnicodes "github.com/contiv-ipam/agent/plugins/podmanager/cni"
	"github.com/contiv-ipam/agent/tests/testenv"
)

// TestBadConfig: a network config contiv-cni cannot use is code 7 with a
// message naming the key and the value, in every version, before any
// agent is asked (none runs here).
func TestBadConfig(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "nobody.sock")
	cases := []struct {
		name   string
		plugin map[string]any
		words  []string
	}{
		{"missing grpcServer", map[string]any{"type": "contiv-cni"}, []string{"grpcServer"}},
		{"grpcTimeout not a duration", pluginMode(socket, "grpcTimeout", "soon"), []string{"grpcTimeout", "soon"}},
		{"grpcTimeout zero", pluginMode(socket, "grpcTimeout", "0s"), []string{"grpcTimeout", "0s"}},
		{"grpcTimeout negative", pluginMode(socket, "grpcTimeout", "-1s"), []string{"grpcTimeout", "-1s"}},
	}
	rt := newRuntime(t)
	for _, c := range cases {
		for _, v := range versions {
			t.Run(c.name+"/"+v, func(t *testing.T) {
				g := NewWithT(t)
				_, err := rt.AddNetworkList(ctxT(t), conflist(t, v, "bad", c.plugin), attachment(t, "bad"))
				e := expectCode(g, err, uint(cnicodes.CodeInvalidNetworkConfig))
				for _, w := range c.words {
					g.Expect(e.Msg).To(ContainSubstring(w))
				}
			})
		}
	}
}

// contivConf is conf/contiv.conf with the pod subnet's keys replaced:
// podSubnetCIDR when podSubnet is not empty, podSubnetOneNodePrefixLen
// when oneNodeLen is not.
func contivConf(t *testing.T, podSubnet, oneNodeLen string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "conf", "contiv.conf"))
	if err != nil {
		t.Fatal(err)
	}
	conf := string(data)
	for _, r := range []struct{ key, old, new string }{
		{"podSubnetCIDR", "10.1.0.0/16", podSubnet},
		{"podSubnetOneNodePrefixLen", "24", oneNodeLen},
	} {
		line := r.key + ": " + r.old
		if !strings.Contains(conf, line) {
			t.Fatalf("conf/contiv.conf no longer says %q; update contivConf", line)
		}
		if r.new != "" {
			conf = strings.Replace(conf, line, r.key+": "+r.new, 1)
		}
	}
	return conf
}

// smallPoolConf is contiv.conf with a pod subnet of /oneNodeLen per node
// (a /29 has 8 addresses: 4 for pods, as network, gateway, NAT loopback
// and broadcast are reserved).
func smallPoolConf(t *testing.T, oneNodeLen string) string { return contivConf(t, "", oneNodeLen) }

// routedConf is contiv.conf with a pod subnet of its own for this test
// process: the ptp tests put routes and the gateway on the host, and
// another run of the suite on the same machine must not meet them.
// 10.112.0.0/16 to 10.239.0.0/16 overlap none of the other subnets of
// conf/contiv.conf (the services are 10.96.0.0/12).
func routedConf(t *testing.T) string {
	return contivConf(t, fmt.Sprintf("10.%d.0.0/16", 112+os.Getpid()%128), "")
}

// grpcTimeout is contiv-cni's deadline in the small-pool test.
const grpcTimeout = 5 * time.Second

// TestSmallPool fills a /29 pod subnet: the fifth ADD is code 101, STATUS
// is code 50 until a DEL frees an address; then the agent is killed (ADD
// is code 11 within contiv-cni's deadline) and restarted (every address
// acknowledged before the kill is still allocated).
func TestSmallPool(t *testing.T) {
	g := NewWithT(t)
	n := startNode(t, testenv.Options{Conf: map[string]string{"contiv.conf": smallPoolConf(t, "29")}})
	g.Expect(n.subnet.Bits()).To(Equal(29))
	ctx, rt := ctxT(t), newRuntime(t)
	name := uniqueName("small")
	list := conflist(t, "1.1.0", name, pluginMode(n.agent.Socket, "grpcTimeout", grpcTimeout.String()))

	var added []*libcni.RuntimeConf
	for i := 0; i < 4; i++ {
		g.Expect(rt.GetStatusNetworkList(ctx, list)).To(Succeed(), "STATUS with %d of 4 used", i)
		att := attachment(t, "fill")
		_, err := rt.AddNetworkList(ctx, list, att)
		g.Expect(err).NotTo(HaveOccurred(), "ADD %d of 4", i+1)
		added = append(added, att)
	}

	_, err := rt.AddNetworkList(ctx, list, attachment(t, "one-too-many"))
	e := expectCode(g, err, uint(cnicodes.CodePoolExhausted))
	g.Expect(e.Msg).To(ContainSubstring(n.subnet.String()), "the ADD error names the pod subnet")
	t.Logf("ADD into a full pool: %v", e)
	e = expectCode(g, rt.GetStatusNetworkList(ctx, list), uint(cnicodes.CodeNotAvailable))
	g.Expect(e.Msg).To(ContainSubstring("no IP address is free"))
	t.Logf("STATUS of a full pool: %v", e)

	g.Expect(rt.DelNetworkList(ctx, list, added[0])).To(Succeed())
	g.Expect(rt.GetStatusNetworkList(ctx, list)).To(Succeed(), "STATUS after a DEL")
	again := attachment(t, "refill")
	_, err = rt.AddNetworkList(ctx, list, again)
	g.Expect(err).NotTo(HaveOccurred(), "ADD after a DEL")
	added[0] = again

	// host-local on the same /29 hands out 5 (it keeps no NAT loopback),
	// then says 999.
	hl := conflist(t, "1.0.0", name, hostLocal(n.subnet, t.TempDir()))
	hlRuntime := newRuntime(t)
	for i := 0; i < 5; i++ {
		_, err := hlRuntime.AddNetworkList(ctx, hl, attachment(t, "hl-fill"))
		g.Expect(err).NotTo(HaveOccurred(), "host-local ADD %d of 5", i+1)
	}
	_, err = hlRuntime.AddNetworkList(ctx, hl, attachment(t, "hl-one-too-many"))
	e = expectCode(g, err, hostLocalCode)
	g.Expect(e.Msg).To(ContainSubstring("no IP addresses available"))

	before := sortedAddrs(n.inNetwork(t, name))
	g.Expect(before).To(HaveLen(4))
	n.killedAgent(t, g, rt, list)

	n.agent.Start(t)
	g.Expect(sortedAddrs(n.inNetwork(t, name))).To(Equal(before), "allocations after SIGKILL and restart")
	expectCode(g, rt.GetStatusNetworkList(ctx, list), uint(cnicodes.CodeNotAvailable))
	for _, att := range added {
		g.Expect(rt.CheckNetworkList(ctx, list, att)).To(Succeed(), "CHECK %s after restart", att.ContainerID)
	}
}

// killedAgent: with the agent killed (its socket file left behind), ADD
// and DEL answer code 11 naming the socket, before contiv-cni's deadline
// ends (the libcni context is only a little longer: a plugin still
// waiting when it ends is killed, and that error is not a CNI code 11).
func (n *node) killedAgent(t *testing.T, g *WithT, rt *libcni.CNIConfig, list *libcni.NetworkConfigList) {
	t.Helper()
	n.agent.Kill(t)
	ctx, cancel := context.WithTimeout(context.Background(), grpcTimeout+2*time.Second)
	defer cancel()
	start := time.Now()
	_, err := rt.AddNetworkList(ctx, list, attachment(t, "agent-down"))
	e := expectCode(g, err, uint(cnicodes.CodeTryAgainLater))
	g.Expect(e.Msg).To(ContainSubstring(n.agent.Socket))
	t.Logf("ADD with the agent killed: %v after %v", e, time.Since(start))
	err = rt.DelNetworkList(ctx, list, attachment(t, "agent-down"))
	expectCode(g, err, uint(cnicodes.CodeTryAgainLater))
}

func sortedAddrs(as []allocation) []string {
	out := make([]string, 0, len(as))
	for _, a := range as {
		out = append(out, a.Addr())
	}
	sort.Strings(out)
	return out
}
