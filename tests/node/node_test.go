//go:build node

package node

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/contiv-ipam/agent/plugins/controller"
	"github.com/contiv-ipam/agent/plugins/ipam"
	"github.com/contiv-ipam/agent/plugins/podmanager"
	"github.com/contiv-ipam/agent/tests/cluster"
)

// ns is the namespace of the scenarios' pods.
const ns = "default"

// Bounds of the scenarios: generous, the figures are logged.
const (
	// podsTimeout bounds 30 pods of a Deployment getting to Running.
	podsTimeout = 3 * time.Minute
	// readyBound bounds the Node's Ready condition following the agent
	// (kubelet asks for the runtime status every 5 s and posts the Node
	// every 10 s).
	readyBound = 60 * time.Second
	// stableFor is how long nothing may change after a restart.
	stableFor = 5 * time.Second
)

// TestNode runs one node through the scenarios in order, each on what
// the one before left: 30 pods Running with the agent's addresses (1);
// kubelet and then containerd restarted under them (3); the agent
// stopped and started again, a pod deleted meanwhile (5); every pod
// deleted, then sandboxes run and removed with crictl, with overlapping
// DELs (2); the node stopped, with nothing left on the machine and its
// sysctls untouched. A failed step ends the test (the next ones depend
// on it).
func TestNode(t *testing.T) {
	sysctls, err := ReadSysctls()
	if err != nil {
		t.Fatal(err)
	}
	n := StartT(t, Options{})
	t.Logf("node %s Ready %s after kubelet's start (whole start %s: API server %s, Contiv %s, containerd %s)", n.Name,
		n.Timings.KubeletReady.Round(time.Millisecond), n.Timings.Total.Round(time.Millisecond),
		n.Timings.APIServer.Round(time.Millisecond), n.Timings.Contiv.Round(time.Millisecond), n.Timings.Containerd.Round(time.Millisecond))
	for _, step := range []struct {
		name string
		run  func(*testing.T, *Node)
	}{
		{"30 pods get the agent's addresses and ping", thirtyPods},
		{"restarting kubelet and containerd changes no address", restarts},
		{"the node follows the agent's readiness", agentStopped},
		{"deleted pods free every address", deleteAll},
		{"overlapping DELs from crictl are harmless", crictlDELs},
	} {
		if !t.Run(step.name, func(t *testing.T) { step.run(t, n) }) {
			return
		}
	}
	t.Run("stop leaves nothing behind", func(t *testing.T) {
		g := NewWithT(t)
		kubelet, containerd := n.Kubelet.PID(), n.Containerd.PID()
		g.Expect(n.Stop()).To(Succeed())
		g.Expect(n.Leftovers()).To(BeEmpty())
		for _, pid := range []int{kubelet, containerd} {
			_, err := os.Stat(filepath.Join("/proc", fmt.Sprint(pid)))
			g.Expect(os.IsNotExist(err)).To(BeTrue(), "process %d (kubelet, containerd) still there", pid)
		}
		g.Expect(processesNaming(n.RunDir, n.Dir)).To(BeEmpty(), "processes naming %s or %s", n.RunDir, n.Dir)
		after, err := ReadSysctls()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(after).To(Equal(sysctls), "the machine's sysctls kubelet writes")
		g.Expect(filepath.Join("/run/netns", n.NetNS)).NotTo(BeAnExistingFile())
	})
}

// podSubnet is the agent's podSubnetThisNode.
func podSubnet(t *testing.T, n *Node) netip.Prefix {
	t.Helper()
	info, err := n.Agent.IPAM(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	p, err := netip.ParsePrefix(info.PodSubnetThisNode)
	if err != nil {
		t.Fatalf("podSubnetThisNode %q: %v", info.PodSubnetThisNode, err)
	}
	return p
}

// podAddresses maps "namespace/name" of every pod to its status.podIPs.
func podAddresses(ctx context.Context, n *Node) (map[string][]string, error) {
	pods, err := n.Pods(ctx, ns, "")
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, p := range pods {
		out[p.Namespace+"/"+p.Name] = PodIPs(p)
	}
	return out, nil
}

// expectPodsMatchAgent: every pod runs with its status addresses equal
// to the agent's allocation for it, the addresses are distinct and in
// subnets (one per family), and the agent holds nothing else.
func expectPodsMatchAgent(t *testing.T, g Gomega, n *Node, pods []corev1.Pod, subnets ...netip.Prefix) {
	t.Helper()
	allocs, err := n.AllocatedIPs(t.Context())
	g.Expect(err).NotTo(HaveOccurred())
	seen := map[string]string{}
	for _, p := range pods {
		key := p.Namespace + "/" + p.Name
		ips := PodIPs(p)
		g.Expect(Running(p)).To(BeTrue(), "pod %s: %s", key, p.Status.Phase)
		g.Expect(ips).To(HaveLen(len(subnets)), "pod %s: status.podIPs %v", key, ips)
		g.Expect(allocs).To(HaveKeyWithValue(key, ConsistOf(ips)), "the agent's allocation of %s", key)
		for i, ip := range ips {
			a, err := netip.ParseAddr(ip)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(subnets[i].Contains(a)).To(BeTrue(), "pod %s: %s in %s", key, a, subnets[i])
			g.Expect(seen).NotTo(HaveKey(ip), "%s of %s is also %s's", ip, key, seen[ip])
			seen[ip] = key
		}
	}
	g.Expect(allocs).To(HaveLen(len(pods)), "the agent holds an address for each pod and no other")
}

// thirtyPods (scenario 1): one pod alone (its Running latency), then a
// Deployment of 29 more: all 30 run with the agent's addresses, distinct,
// in podSubnetThisNode; two pods ping each other and the gateway.
func thirtyPods(t *testing.T, n *Node) {
	g := NewWithT(t)
	ctx := t.Context()
	subnet := podSubnet(t, n)

	t0 := time.Now()
	g.Expect(n.CreatePod(ctx, BusyboxPod(ns, "solo"))).To(Succeed())
	_, err := n.WaitPodsRunning(ctx, ns, LabelApp+"=solo", 1, time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	solo := time.Since(t0)
	t.Logf("one pod: Running %s after its creation", solo.Round(time.Millisecond))

	t0 = time.Now()
	g.Expect(n.CreateDeployment(ctx, BusyboxDeployment(ns, "web", 29))).To(Succeed())
	_, err = n.WaitPodsRunning(ctx, ns, LabelApp+"=web", 29, podsTimeout)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("a Deployment of 29: all Running %s after its creation", time.Since(t0).Round(time.Millisecond))
	g.Expect(solo).To(BeNumerically("<", 30*time.Second), "one pod's Running latency")

	pods, err := n.Pods(ctx, ns, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pods).To(HaveLen(30))
	expectPodsMatchAgent(t, g, n, pods, subnet)

	a, b := pods[0], pods[1]
	gateway := subnet.Masked().Addr().Next()
	routes, err := n.Exec(ctx, a, "ip", "route")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(routes).To(ContainSubstring("default via "+gateway.String()), "routes in %s", a.Name)
	g.Expect(n.Ping(ctx, a, b.Status.PodIP)).To(Succeed())
	g.Expect(n.Ping(ctx, b, a.Status.PodIP)).To(Succeed())
	g.Expect(n.Ping(ctx, a, gateway.String())).To(Succeed())
	t.Logf("%s (%s) and %s (%s) ping each other and the gateway %s", a.Name, a.Status.PodIP, b.Name, b.Status.PodIP, gateway)
}

// nodeState is what must not change while the pods run: each pod's
// addresses, the agent's allocations and the ready sandboxes.
type nodeState struct {
	Pods      map[string][]string
	Allocs    map[string][]string
	Sandboxes []string
}

// state reads the node's state.
func state(ctx context.Context, n *Node) (nodeState, error) {
	var s nodeState
	var err error
	if s.Pods, err = podAddresses(ctx, n); err != nil {
		return s, err
	}
	if s.Allocs, err = n.AllocatedIPs(ctx); err != nil {
		return s, err
	}
	sbs, err := n.Containerd.Sandboxes(ctx)
	if err != nil {
		return s, err
	}
	for _, sb := range sbs {
		if sb.State == "SANDBOX_READY" {
			s.Sandboxes = append(s.Sandboxes, sb.ID)
		}
	}
	slices.Sort(s.Sandboxes)
	return s, nil
}

// restarts (scenario 3): kubelet, then containerd, restarted with the
// pods running: the Node is Ready again, and no pod's address, no
// allocation and no sandbox changes (none is added, none leaks).
func restarts(t *testing.T, n *Node) {
	g := NewWithT(t)
	ctx := t.Context()
	before, err := state(ctx, n)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(before.Sandboxes).To(HaveLen(30))
	current := func() (nodeState, error) { return state(ctx, n) }

	t0 := time.Now()
	g.Expect(n.RestartKubelet(ctx)).To(Succeed())
	g.Expect(n.WaitReady(ctx, true, readyBound)).To(Succeed())
	t.Logf("kubelet restarted: healthy and the node Ready %s later", time.Since(t0).Round(time.Millisecond))
	g.Consistently(current, stableFor, 500*time.Millisecond).Should(Equal(before), "after kubelet's restart")

	t0 = time.Now()
	g.Expect(n.RestartContainerd(ctx)).To(Succeed())
	g.Expect(n.WaitReady(ctx, true, readyBound)).To(Succeed())
	t.Logf("containerd restarted: node Ready %s later", time.Since(t0).Round(time.Millisecond))
	g.Consistently(current, stableFor, 500*time.Millisecond).Should(Equal(before), "after containerd's restart")
}

// agentStopped (scenario 5): with the agent stopped, CNI STATUS fails and
// the Node goes NotReady; a pod deleted meanwhile stays, since its CNI
// DEL fails (its address is not given up on a guess). Once the agent runs
// again the Node is Ready, kubelet's next DEL frees that pod's address
// and the pod goes, and every other pod keeps its address (the agent
// restores them from bolt).
func agentStopped(t *testing.T, n *Node) {
	g := NewWithT(t)
	ctx := t.Context()
	before, err := state(ctx, n)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(before.Allocs).To(HaveKey(ns + "/solo"))

	t0 := time.Now()
	g.Expect(n.StopAgent()).To(Succeed())
	g.Expect(n.WaitReady(ctx, false, 2*readyBound)).To(Succeed())
	notReady := time.Since(t0)
	_, msg, err := n.NodeReady(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("agent stopped: node NotReady %s later (%s)", notReady.Round(time.Millisecond), msg)
	g.Expect(msg).To(ContainSubstring("network"), "the NotReady reason")

	g.Expect(n.DeletePod(ctx, ns, "solo")).To(Succeed())
	pods := n.Kube.Client.CoreV1().Pods(ns)
	g.Consistently(func() error { _, err := pods.Get(ctx, "solo", metav1.GetOptions{}); return err }, stableFor, 500*time.Millisecond).
		Should(Succeed(), "a pod whose CNI DEL fails stays")

	t0 = time.Now()
	g.Expect(n.StartAgent(ctx)).To(Succeed())
	g.Expect(n.WaitReady(ctx, true, 2*readyBound)).To(Succeed())
	ready := time.Since(t0)
	t.Logf("agent started again: node Ready %s later", ready.Round(time.Millisecond))
	g.Expect(notReady).To(BeNumerically("<", readyBound), "NotReady after the agent stopped")
	g.Expect(ready).To(BeNumerically("<", readyBound), "Ready after the agent started")
	g.Expect(n.WaitNoPods(ctx, ns, LabelApp+"=solo", readyBound)).To(Succeed(), "the pod deleted while the agent was stopped")
	t.Logf("the pod deleted while the agent was stopped: gone %s after the agent's start", time.Since(t0).Round(time.Millisecond))

	delete(before.Pods, ns+"/solo")
	delete(before.Allocs, ns+"/solo")
	g.Eventually(func() (nodeState, error) {
		s, err := state(ctx, n)
		s.Sandboxes = nil // solo's is gone, the others are compared below
		return s, err
	}, 30*time.Second, 200*time.Millisecond).Should(Equal(nodeState{Pods: before.Pods, Allocs: before.Allocs}),
		"pods and allocations across the agent's restart")
	after, err := state(ctx, n)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(after.Sandboxes).To(HaveLen(29))
	g.Expect(before.Sandboxes).To(ContainElements(after.Sandboxes), "the sandboxes across the agent's restart")
}

// deleteAll (scenario 2, through Kubernetes): the Deployment deleted (the
// garbage collector deletes its pods), every pod gone, no allocation is
// left.
func deleteAll(t *testing.T, n *Node) {
	g := NewWithT(t)
	ctx := t.Context()
	t0 := time.Now()
	g.Expect(n.DeleteDeployment(ctx, ns, "web")).To(Succeed())
	g.Expect(n.WaitNoPods(ctx, ns, "", 2*time.Minute)).To(Succeed())
	t.Logf("the Deployment's 29 pods deleted and gone in %s", time.Since(t0).Round(time.Millisecond))
	g.Eventually(func() (map[string][]string, error) { return n.AllocatedIPs(ctx) }, 30*time.Second, 200*time.Millisecond).
		Should(BeEmpty(), "allocations once every pod is gone")
}

// sandboxConfig is crictl's pod sandbox config for a pod of the default
// namespace (containerd passes K8S_POD_NAMESPACE and K8S_POD_NAME on).
func sandboxConfig(t *testing.T, dir, name string) string {
	t.Helper()
	file := filepath.Join(dir, name+".json")
	conf := fmt.Sprintf(`{"metadata":{"name":%q,"namespace":%q,"uid":"uid-%s","attempt":0},"linux":{}}`, name, ns, name)
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// crictlDELs (scenario 2, through the CRI alone, with kubelet stopped so
// that it does not remove these sandboxes it does not know): two
// sandboxes get distinct addresses; one is stopped twice and removed at
// the same time (overlapping and duplicate CNI DELs, with and without
// the network namespace): its address is free, the other keeps its own;
// a third sandbox gets an address, not the other's; removing the rest
// leaves no allocation.
func crictlDELs(t *testing.T, n *Node) {
	g := NewWithT(t)
	ctx := t.Context()
	g.Expect(n.Kubelet.Stop()).To(Succeed())
	t.Cleanup(func() {
		if err := n.Kubelet.Start(); err != nil {
			t.Error(err)
		} else if err := n.WaitReady(context.Background(), true, readyBound); err != nil {
			t.Error(err)
		}
	})
	dir := t.TempDir()
	runp := func(name string) string {
		t0 := time.Now()
		out, err := n.Containerd.Crictl(ctx, "runp", sandboxConfig(t, dir, name))
		g.Expect(err).NotTo(HaveOccurred())
		t.Logf("crictl runp %s: %s", name, time.Since(t0).Round(time.Millisecond))
		return strings.TrimSpace(string(out))
	}
	a, b := runp("crictl-a"), runp("crictl-b")
	allocs, err := n.AllocatedIPs(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(allocs).To(HaveLen(2))
	addrB := allocs[ns+"/crictl-b"]
	g.Expect(addrB).To(HaveLen(1))
	g.Expect(allocs[ns+"/crictl-a"]).NotTo(Equal(addrB))

	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i, args := range [][]string{{"stopp", a}, {"stopp", a}, {"rmp", "-f", a}} {
		wg.Go(func() { _, errs[i] = n.Containerd.Crictl(ctx, args...) })
	}
	wg.Wait()
	for i, err := range errs {
		// A call that lost the race finds the sandbox gone, or ptp's own
		// teardown lost it: two DELs of one sandbox in flight, ptp looks
		// eth0 up, the other DEL removes it, ptp's delete then finds "no
		// such device" (after its IPAM DEL reached us). Neither is an
		// error of the address; the last rmp below must succeed.
		if err != nil {
			g.Expect(err.Error()).To(Or(ContainSubstring("not found"), ptpLostRace), "call %d", i)
			t.Logf("overlapping call %d: %v", i, err)
		}
	}
	_, err = n.Containerd.Crictl(ctx, "rmp", "-f", a)
	g.Expect(err).To(Or(Not(HaveOccurred()), MatchError(ContainSubstring("not found"))), "a last rmp of a removed sandbox")
	dels, err := deleteEvents(ctx, n, ns+"/crictl-a")
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("crictl-a: %d CNI DELs reached the agent", dels)
	g.Expect(dels).To(BeNumerically(">=", 2), "DELs of crictl-a (stopp with the network namespace, rmp without)")
	allocs, err = n.AllocatedIPs(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(allocs).To(Equal(map[string][]string{ns + "/crictl-b": addrB}), "after the DELs of crictl-a")

	c := runp("crictl-c")
	allocs, err = n.AllocatedIPs(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(allocs).To(HaveLen(2))
	g.Expect(allocs[ns+"/crictl-c"]).NotTo(Equal(addrB), "crictl-c's address")
	for _, id := range []string{b, c} {
		_, err := n.Containerd.Crictl(ctx, "stopp", id)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = n.Containerd.Crictl(ctx, "rmp", id)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(n.AllocatedIPs(ctx)).To(BeEmpty(), "allocations after every sandbox is removed")
	var conflicts ipam.Conflicts
	g.Expect(cluster.GetJSON(ctx, n.Agent.REST+ipam.ConflictsPath, &conflicts)).To(Succeed())
	g.Expect(conflicts.Conflicts).To(BeEmpty(), "records moved aside")
}

// ptpLostRace matches ptp's failed DEL when a concurrent DEL removed the
// container's interface between ptp's lookup and its delete.
var ptpLostRace = And(ContainSubstring("ptp"), ContainSubstring("failed (delete)"), ContainSubstring("no such device"))

// deleteEvents counts the Delete Pod events of the pod ("namespace/name")
// in the agent's event history: one per CNI DEL that reached it.
func deleteEvents(ctx context.Context, n *Node, pod string) (int, error) {
	var records []controller.EventRecord
	if err := cluster.GetJSON(ctx, n.Agent.REST+controller.EventHistoryPath+"?limit=1000", &records); err != nil {
		return 0, err
	}
	count := 0
	for _, r := range records {
		if r.Name == podmanager.DeletePodName && strings.Contains(r.Description, " "+pod+" ") {
			count++
		}
	}
	return count, nil
}
