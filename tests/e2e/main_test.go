package e2e

import (
	"context"
	"net/netip"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/ipam"
	"github.com/contiv-ipam/agent/tests/cluster"
	"github.com/contiv-ipam/agent/tests/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// ipamOf reads the agent's GET /contiv/v1/ipam.
func ipamOf(t *testing.T, a *cluster.Agent) ipam.NodeIPAMInfo {
	t.Helper()
	info, err := a.IPAM(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// podSubnet is the agent's podSubnetThisNode (for Eventually).
func podSubnet(ctx context.Context, a *cluster.Agent) func() (string, error) {
	return func() (string, error) {
		info, err := a.IPAM(ctx)
		return info.PodSubnetThisNode, err
	}
}

// podIPs is the agent's allocations: "namespace/name" -> address (for
// Eventually).
func podIPs(ctx context.Context, a *cluster.Agent) func() (map[string]string, error) {
	return func() (map[string]string, error) {
		allocs, err := a.Allocations(ctx)
		out := map[string]string{}
		for _, al := range allocs {
			out[al.PodID.Namespace+"/"+al.PodID.Name] = al.Addr()
		}
		return out, err
	}
}

// host is address n of subnet.
func host(g Gomega, subnet string, n int) string {
	p, err := netip.ParsePrefix(subnet)
	g.Expect(err).NotTo(HaveOccurred())
	a := p.Masked().Addr()
	for range n {
		a = a.Next()
	}
	g.Expect(p.Contains(a)).To(BeTrue(), "host %d of %s", n, subnet)
	return a.String()
}
