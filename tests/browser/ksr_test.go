package browser

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"golang.org/x/net/html"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/contiv-ipam/agent/plugins/ksr"
	"github.com/contiv-ipam/agent/plugins/ksr/model/agentstatus"
	"github.com/contiv-ipam/agent/plugins/podmanager/cni"
	"github.com/contiv-ipam/agent/tests/cluster"
	"github.com/contiv-ipam/agent/tests/kubeenv"
)

// TestKSRClusterPage runs a kube-apiserver, the Contiv etcd, contiv-ksr and
// three contiv-agents (real processes on loopback), makes CNI ADDs on two
// of them, writes the status record of a fourth node whose agent stopped
// long ago, and looks at contiv-ksr's cluster page (its GET / for
// browsers) in chromium: one heat-map cell per node in node-ID order, the
// fill of each agent, the stale node marked, the node table, the mirror's
// freshness; then takes its screenshot (ksr-cluster.png, 1200x800).
func TestKSRClusterPage(t *testing.T) {
	Require(t)
	g := NewWithT(t)
	ctx := t.Context()
	kube := kubeenv.StartT(t)
	c := cluster.StartT(t, cluster.TestBins(t), kube.Kubeconfig)
	k := c.AddKSRT(t, ksr.Config{MirrorHeartbeat: 2 * time.Second})
	nodes := []string{"worker-a", "worker-b", "worker-c"}
	adds := map[string]int{"worker-a": 12, "worker-b": 4}
	for i, name := range nodes {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("127.0.0.%d", 11+i)}}}}
		_, err := kube.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
	}
	for _, name := range nodes {
		a := c.AddAgentT(t, cluster.AgentOptions{Node: name, Conf: map[string]string{"ipam.conf": "statusPublishPeriod: 1s\n"}})
		if adds[name] > 0 {
			cniAdds(t, a.Socket, name, adds[name])
		}
	}
	// A node whose agent stopped an hour ago without deleting its record.
	gone := agentstatus.Status{Version: 1, Node: "worker-gone", NodeID: 40, REST: "http://127.0.0.1:1", Ready: true,
		Pools:   []agentstatus.Pool{{Name: "10.1.40.0/24", Family: 4, Prefix: "10.1.40.0/24", Used: 100, Total: 253}},
		Updated: time.Now().Add(-time.Hour), PeriodSeconds: 30}
	b, err := gone.Encode()
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.ClientT(t).Put(ctx, agentstatus.Key(gone.Node), string(b))
	g.Expect(err).NotTo(HaveOccurred())

	// Wait for contiv-ksr to see every record with the ADDs counted.
	var v ksr.ClusterView
	g.Eventually(func(g Gomega) {
		v = ksr.ClusterView{}
		g.Expect(cluster.GetJSON(ctx, k.REST+ksr.NodesStatusPath, &v)).To(Succeed())
		g.Expect(v.Nodes).To(HaveLen(4))
		used, states := map[string]uint64{}, map[string]string{}
		for _, n := range v.Nodes {
			used[n.Name], states[n.Name] = n.Used, n.State
		}
		g.Expect(used).To(Equal(map[string]uint64{"worker-a": 12, "worker-b": 4, "worker-c": 0, "worker-gone": 100}))
		g.Expect(states).To(Equal(map[string]string{"worker-a": ksr.NodeFresh, "worker-b": ksr.NodeFresh,
			"worker-c": ksr.NodeFresh, "worker-gone": ksr.NodeStale}))
		g.Expect(v.Mirror).NotTo(BeNil())
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())

	dom := DumpDOM(t, k.REST+"/")
	doc, err := html.Parse(strings.NewReader(dom))
	g.Expect(err).NotTo(HaveOccurred())

	cells := all(doc, byClass("node-cell"))
	g.Expect(cells).To(HaveLen(4), "one cell per node")
	var ids []int
	byName := map[string]*html.Node{}
	for _, cell := range cells {
		ids = append(ids, atoi(t, attr(cell, "data-id")))
		byName[attr(cell, "data-node")] = cell
	}
	g.Expect(slices.IsSorted(ids)).To(BeTrue(), "cells by node ID: %v", ids)
	g.Expect(ids[3]).To(Equal(40))
	for _, n := range v.Nodes {
		cell := byName[n.Name]
		g.Expect(cell).NotTo(BeNil(), n.Name)
		g.Expect(attr(cell, "data-id")).To(Equal(strconv.Itoa(int(n.ID))))
	}
	for _, name := range nodes {
		g.Expect(byClass(ksr.NodeFresh)(byName[name])).To(BeTrue(), name)
	}
	g.Expect(byClass(ksr.NodeStale)(byName["worker-gone"])).To(BeTrue(), "the stale record is marked")
	g.Expect(attr(one(t, byName["worker-gone"], byTag("rect")), "fill")).To(Equal("url(#hatch)"))
	for _, n := range v.Nodes {
		title := text(one(t, byName[n.Name], byTag("title")))
		g.Expect(title).To(ContainSubstring(fmt.Sprintf("%s (ID %d): %d/%d used", n.Name, n.ID, n.Used, n.Total)))
	}

	rows := all(doc, byClass("node-row"))
	g.Expect(rows).To(HaveLen(4))
	for i, n := range v.Nodes {
		g.Expect(attr(rows[i], "data-node")).To(Equal(n.Name))
		cells := all(rows[i], byTag("td"))
		g.Expect(text(cells[0])).To(Equal(strconv.Itoa(int(n.ID))))
		if len(n.IPs) > 0 {
			g.Expect(text(cells[2])).To(Equal(strings.Join(n.IPs, ", ")), "the node IPs of its allocatedIDs record")
		}
	}
	g.Expect(text(all(rows[3], byTag("td"))[4])).To(ContainSubstring("(stale)"))
	g.Expect(text(all(rows[0], byTag("td"))[3])).To(Equal("yes"), "the agent is ready")

	freshness := one(t, doc, byAttr("id", "mirror-freshness"))
	g.Expect(byClass("fresh")(freshness)).To(BeTrue(), text(freshness))
	g.Expect(text(freshness)).To(ContainSubstring("every 2s"))
	g.Expect(text(one(t, doc, byAttr("id", "mirror")))).To(ContainSubstring("leader"))
	g.Expect(all(doc, byTag("script"))).To(BeEmpty())

	shot := filepath.Join(t.ArtifactDir(), "ksr-cluster.png")
	Screenshot(t, k.REST+"/", shot, 1200, 800)
	checkPNG(t, shot, 1200, 800)
	if dir := os.Getenv(ScreenshotDirEnv); dir != "" {
		g.Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
		out := filepath.Join(dir, "ksr-cluster.png")
		Screenshot(t, k.REST+"/", out, 1200, 800)
		checkPNG(t, out, 1200, 800)
		t.Logf("screenshot written to %s", out)
	}
}

// cniAdds makes n CNI ADDs on the agent of node through its socket.
func cniAdds(t *testing.T, socket, node string, n int) {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	rc := cni.NewRemoteCNIClient(conn)
	for i := range n {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		reply, err := rc.Add(ctx, addRequest(fmt.Sprintf("%s-c%d", node, i), fmt.Sprintf("%s-pod-%d", node, i)))
		cancel()
		if err != nil || reply.GetResult() != cni.CNIReply_OK {
			t.Fatalf("CNI ADD %d on %s: %v %s", i, node, err, reply.GetError())
		}
	}
}
