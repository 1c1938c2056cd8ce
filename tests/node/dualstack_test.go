//go:build node

package node

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/tests/kubeenv"
)

// TestDualStackNode (scenario 8): a node whose agent has an IPv6 pod
// subnet too (conf/contiv-dualstack.conf; the API server's service range
// stays IPv4): every pod gets an address of each family in
// status.podIPs, equal to the agent's allocation, each in its family's
// podSubnetThisNode; pods ping each other and both gateways over both
// families; deleting them frees every address.
func TestDualStackNode(t *testing.T) {
	g := NewWithT(t)
	conf, err := os.ReadFile(filepath.Join(kubeenv.RepoRoot(), "conf", "contiv-dualstack.conf"))
	g.Expect(err).NotTo(HaveOccurred())
	n := StartT(t, Options{ContivConf: string(conf)})
	ctx := t.Context()

	info, err := n.Agent.IPAM(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.DualStack).NotTo(BeNil(), "GET /contiv/v1/ipam dualStack")
	var subnets []netip.Prefix
	for _, s := range []string{info.PodSubnetThisNode, info.DualStack.PodSubnetThisNode} {
		p, err := netip.ParsePrefix(s)
		g.Expect(err).NotTo(HaveOccurred())
		subnets = append(subnets, p)
	}

	t0 := time.Now()
	g.Expect(n.CreateDeployment(ctx, BusyboxDeployment(ns, "ds", 4))).To(Succeed())
	pods, err := n.WaitPodsRunning(ctx, ns, LabelApp+"=ds", 4, podsTimeout)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("4 dual-stack pods Running %s after the Deployment's creation", time.Since(t0).Round(time.Millisecond))
	expectPodsMatchAgent(t, g, n, pods, subnets...)

	a, b := pods[0], pods[1]
	gateways := []string{subnets[0].Masked().Addr().Next().String(), info.DualStack.PodGatewayIP}
	for i, gateway := range gateways {
		g.Expect(n.Ping(ctx, a, PodIPs(b)[i])).To(Succeed())
		g.Expect(n.Ping(ctx, b, PodIPs(a)[i])).To(Succeed())
		g.Expect(n.Ping(ctx, a, gateway)).To(Succeed())
		t.Logf("%s (%s) and %s (%s) ping each other and the gateway %s", a.Name, PodIPs(a)[i], b.Name, PodIPs(b)[i], gateway)
	}

	g.Expect(n.DeleteDeployment(ctx, ns, "ds")).To(Succeed())
	g.Expect(n.WaitNoPods(ctx, ns, "", 2*time.Minute)).To(Succeed())
	g.Eventually(func() (map[string][]string, error) { return n.AllocatedIPs(ctx) }, 30*time.Second, 200*time.Millisecond).
		Should(BeEmpty(), "allocations once every pod is gone")
}
