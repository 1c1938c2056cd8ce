package main

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/contiv-ipam/agent/plugins/ksr"
	"github.com/contiv-ipam/agent/tests/cluster"
	"github.com/contiv-ipam/agent/tests/kubeenv"
)

// The contiv-netctl binary against a real cluster (tests/cluster): an
// etcd, contiv-ksr mirroring a kube-apiserver, two agents publishing
// their status records every second, pods connected through contiv-cni.
// nodes lists both nodes with their IDs and pods used equal to their
// allocations; pods lists every pod with its addresses on its node; ipam
// NODE shows that node's subnet; the JSON decodes. Then one agent is
// killed: pods still lists the other's pods, warns about it and exits 1,
// and nodes shows its status going stale, never ready.
func TestEndToEndClusterViews(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no agent binaries")
	}
	g := NewWithT(t)
	ctx := t.Context()
	kube := kubeenv.StartT(t)
	c := cluster.StartT(t, cluster.TestBins(t), kube.Kubeconfig)
	c.AddKSRT(t, ksr.Config{})
	nodes := []string{"node-a", "node-b"}
	for _, n := range nodes {
		_, err := kube.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
	}
	agents := map[string]*cluster.Agent{}
	for _, n := range nodes {
		agents[n] = c.AddAgentT(t, cluster.AgentOptions{Node: n, Conf: map[string]string{"ipam.conf": "statusPublishPeriod: 1s\n"}})
	}
	pods := map[string][]string{"node-a": {"web-0", "web-1", "web-2"}, "node-b": {"db-0", "db-1"}}
	for n, names := range pods {
		for _, name := range names {
			_, err := kube.Client.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
				Spec: corev1.PodSpec{NodeName: n, Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}}}},
				metav1.CreateOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			cniAddAt(t, agents[n].Socket, "default", name, "cid-"+name)
		}
	}
	// What the agents hold: pod -> address, node of each pod, subnets.
	held, nodeOf, subnet := map[string]string{}, map[string]string{}, map[string]string{}
	for n, a := range agents {
		allocs, err := a.Allocations(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(allocs).To(HaveLen(len(pods[n])))
		for _, al := range allocs {
			key := al.PodID.Namespace + "/" + al.PodID.Name
			held[key], nodeOf[key] = al.Addr(), n
		}
		info, err := a.IPAM(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		subnet[n] = info.PodSubnetThisNode
	}
	env := []string{envEtcd + "=" + c.Etcd.Endpoint, envServer + "=" + agents["node-a"].REST, envNoColor + "=1"}

	// nodes -o json: both nodes, each with its ID, ready, pods equal to
	// its allocations (the status record follows within a period).
	type jsonNode struct {
		ID     uint32 `json:"id"`
		Name   string `json:"name"`
		Agent  string `json:"agent"`
		Status *struct {
			REST string `json:"rest"`
			Pods int    `json:"pods"`
		} `json:"status"`
		Lease struct {
			Present    bool   `json:"present"`
			TTLSeconds *int64 `json:"ttlSeconds"`
		} `json:"lease"`
	}
	readNodes := func(g Gomega) map[string]jsonNode {
		res := binNetctlEnv(t, env, "nodes", "-o", "json")
		g.Expect(res.code).To(Equal(exitOK), res.stderr)
		var out struct{ Nodes []jsonNode }
		g.Expect(json.Unmarshal([]byte(res.stdout), &out)).To(Succeed(), res.stdout)
		m := map[string]jsonNode{}
		for _, n := range out.Nodes {
			m[n.Name] = n
		}
		return m
	}
	g.Eventually(func(g Gomega) {
		m := readNodes(g)
		for _, n := range nodes {
			g.Expect(m).To(HaveKey(n))
			g.Expect(m[n].ID).NotTo(BeZero())
			g.Expect(m[n].Agent).To(Equal(agentReady))
			g.Expect(m[n].Status).NotTo(BeNil())
			g.Expect(m[n].Status.Pods).To(Equal(len(pods[n])), "node %s", n)
			g.Expect(m[n].Status.REST).To(Equal(agents[n].REST))
			g.Expect(m[n].Lease.Present).To(BeTrue())
			g.Expect(m[n].Lease.TTLSeconds).NotTo(BeNil())
		}
	}).WithTimeout(20 * time.Second).WithPolling(300 * time.Millisecond).Should(Succeed())
	m := readNodes(g)
	g.Expect(m["node-a"].ID).NotTo(Equal(m["node-b"].ID))

	// The table: a row per node with its ID, name, PODS used/total.
	res := binNetctlEnv(t, env, "nodes")
	g.Expect(res.code).To(Equal(exitOK), res.stderr)
	for _, n := range nodes {
		g.Expect(res.stdout).To(MatchRegexp(`(?m)^%d\s+%s\s+.*\s%d/\d+\s+ready\s+\d+s$`, m[n].ID, n, len(pods[n])), res.stdout)
	}
	res = binNetctlEnv(t, env, "nodes", "-o", "name")
	g.Expect(res.stdout).To(Equal("node-a\nnode-b\n"))

	// pods: every pod with its address on its node.
	res = binNetctlEnv(t, env, "pods", "-o", "json")
	g.Expect(res.code).To(Equal(exitOK), res.stderr)
	var listed podsReply
	g.Expect(json.Unmarshal([]byte(res.stdout), &listed)).To(Succeed(), res.stdout)
	g.Expect(listed.Unreachable).To(BeEmpty())
	got := map[string]string{}
	for _, p := range listed.Pods {
		key := p.Namespace + "/" + p.Name
		g.Expect(p.Node).To(Equal(nodeOf[key]), key)
		g.Expect(p.IPs).To(HaveLen(1))
		g.Expect(p.ContainerID).To(Equal("cid-" + p.Name))
		got[key] = p.IPs[0]
	}
	g.Expect(got).To(Equal(held))
	res = binNetctlEnv(t, env, "pods")
	g.Expect(res.code).To(Equal(exitOK), res.stderr)
	for key, ip := range held {
		ns, name, _ := strings.Cut(key, "/")
		g.Expect(res.stdout).To(MatchRegexp(`(?m)^%s\s+%s\s+%s\s+%s\s`, ns, name, regexp.QuoteMeta(ip), nodeOf[key]))
	}
	res = binNetctlEnv(t, env, "pods", "--node", "node-b", "-o", "name")
	g.Expect(res.code).To(Equal(exitOK), res.stderr)
	g.Expect(res.stdout).To(Equal("default/db-0\ndefault/db-1\n"))

	// ipam NODE: that node's subnet, from its agent.
	for _, n := range nodes {
		res = binNetctlEnv(t, env, "ipam", n)
		g.Expect(res.code).To(Equal(exitOK), res.stderr)
		g.Expect(res.stdout).To(MatchRegexp(`(?m)^Node name:\s+%s$`, n))
		g.Expect(res.stdout).To(MatchRegexp(`(?m)^Pod subnet this node:\s+%s$`, regexp.QuoteMeta(subnet[n])))
		g.Expect(res.stdout).To(ContainSubstring(fmt.Sprintf("Node ID:               %d\n", m[n].ID)))
		g.Expect(res.stdout).To(MatchRegexp(`\] \d+%% %d/\d+`, len(pods[n])), "the fill bar counts the pods")
	}
	res = binNetctlEnv(t, env, "ipam", "node-b", "-o", "json")
	g.Expect(res.code).To(Equal(exitOK), res.stderr)
	var view ipamView
	g.Expect(json.Unmarshal([]byte(res.stdout), &view)).To(Succeed(), res.stdout)
	g.Expect(view.NodeName).To(Equal("node-b"))
	g.Expect(view.Server).To(Equal(agents["node-b"].REST))
	g.Expect(view.Families[0].PodSubnet).To(Equal(subnet["node-b"]))
	g.Expect(netip.MustParsePrefix(subnet["node-b"]).Contains(netip.MustParseAddr(view.Families[0].PodGateway))).To(BeTrue())
	g.Expect(view.Pools).NotTo(BeEmpty())
	g.Expect(view.Totals.Assigned).To(BeNumerically(">=", len(pods["node-b"])))
	res = binNetctlEnv(t, env, "ipam")
	g.Expect(res.code).To(Equal(exitOK), res.stderr)
	g.Expect(res.stdout).To(MatchRegexp(`(?m)^Node name:\s+node-a$`), "without NODE: the agent at -server")

	// node-b's agent is killed: its status stays and goes stale; pods
	// lists node-a's pods, warns about node-b and exits 1.
	g.Expect(agents["node-b"].Kill()).To(Succeed())
	res = binNetctlEnv(t, env, "-timeout", "2s", "pods", "-o", "name")
	g.Expect(res.code).To(Equal(exitError))
	var names []string
	for _, p := range pods["node-a"] {
		names = append(names, "default/"+p)
	}
	slices.Sort(names)
	g.Expect(res.stdout).To(Equal(strings.Join(names, "\n") + "\n"))
	g.Expect(res.stderr).To(ContainSubstring("contiv-netctl: warning: node node-b: GET " + agents["node-b"].REST + "/contiv/v1/ipam/allocations: "))
	g.Eventually(func(g Gomega) {
		n := readNodes(g)["node-b"]
		g.Expect(n.Agent).To(Equal(agentStale))
	}).WithTimeout(15 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	res = binNetctlEnv(t, env, "nodes")
	g.Expect(res.stdout).To(MatchRegexp(`(?m)^%d\s+node-b\s.*\sstale \d+s\s`, m["node-b"].ID))
}
