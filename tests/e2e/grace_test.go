package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/contiv-ipam/agent/plugins/ksr"
	"github.com/contiv-ipam/agent/tests/cluster"
	"github.com/contiv-ipam/agent/tests/kubeenv"
)

// grace is the nodeIDGracePeriod of the scenario.
const grace = 5 * time.Second

// idRevision is the create revision of allocatedIDs/<id>, 0 when absent
// (for Eventually and Consistently).
func idRevision(ctx context.Context, cli *clientv3.Client, id uint32) func() (int64, error) {
	return func() (int64, error) {
		rev, _, err := idRecord(ctx, cli, id)
		return rev, err
	}
}

// pendingNodes are the nodes in contiv-ksr's pendingNodeIDReleases.
func pendingNodes(ctx context.Context, k *cluster.KSR) func() ([]string, error) {
	return func() ([]string, error) {
		st, err := k.Status(ctx)
		var out []string
		for _, p := range st.PendingNodeIDReleases {
			out = append(out, p.Node)
		}
		return out, err
	}
}

// A deleted Node's ID is freed once the Node has been gone for the grace
// period, not before, and only if its agent has stopped: the ID of a
// node whose agent still runs is never freed (its record is never
// deleted, so its create revision stays).
func TestNodeIDFreedAfterTheGracePeriodOnly(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := t.Context()
	kube := kubeenv.StartT(t)
	c := cluster.StartT(t, cluster.TestBins(t), kube.Kubeconfig)
	k := c.AddKSRT(t, ksr.Config{NodeIDGracePeriod: grace})
	cli := c.ClientT(t)
	createNode(t, kube, "gone-node", "")
	createNode(t, kube, "live-node", "")
	gone := c.AddAgentT(t, cluster.AgentOptions{Node: "gone-node"})
	live := c.AddAgentT(t, cluster.AgentOptions{Node: "live-node"})
	goneID, liveID := ipamOf(t, gone).NodeID, ipamOf(t, live).NodeID
	liveRev, liveName, err := idRecord(ctx, cli, liveID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(liveName).To(Equal("live-node"))
	g.Expect(idRevision(ctx, cli, goneID)()).NotTo(BeZero(), "gone-node's ID record before the test")

	g.Expect(gone.Stop(cluster.StopTimeout)).To(Succeed(), "a clean stop of gone-node's agent")
	deleted := time.Now()
	deleteNode(t, kube, "live-node") // due first: tried by the time gone-node's ID is freed
	deleteNode(t, kube, "gone-node")
	g.Eventually(pendingNodes(ctx, k)).Should(ContainElements("gone-node", "live-node"),
		"GET /contiv/v1/ksr lists both IDs as pending")

	g.Consistently(idRevision(ctx, cli, goneID)).WithTimeout(time.Until(deleted.Add(grace-500*time.Millisecond))).
		ShouldNot(BeZero(), "gone-node's ID is kept until the grace period ends")
	g.Eventually(idRevision(ctx, cli, goneID)).WithTimeout(time.Until(deleted.Add(grace+5*time.Second))).
		Should(BeZero(), "gone-node's ID is freed once the grace period has passed")
	g.Consistently(idRevision(ctx, cli, liveID)).WithTimeout(time.Second).Should(Equal(liveRev),
		"live-node's ID record, past due but its agent runs, is never deleted")
	g.Expect(ipamOf(t, live).NodeID).To(Equal(liveID), "live-node's agent keeps its ID")
}
