//go:build node

package node

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/contiv-ipam/agent/plugins/ipam"
	"github.com/contiv-ipam/agent/plugins/ksr"
	"github.com/contiv-ipam/agent/plugins/podmanager/cni"
	"github.com/contiv-ipam/agent/tests/cluster"
)

// The witness node: the agent asks containerd (criSocket) every second
// and releases the address of a pod missing from Kubernetes after a short
// grace period; contiv-ksr beats every second. The GC's period (15 s)
// stays well above a sandbox's start under load: containerd lists a
// sandbox only once RunPodSandbox is done, after its CNI ADD.
const (
	witnessGrace = 5 * time.Second
	witnessBeat  = time.Second
)

func witnessNode(t *testing.T) *Node {
	return StartT(t, Options{
		AgentConf: func(n *Node) map[string]string {
			return map[string]string{"podmanager.conf": fmt.Sprintf("criSocket: %s\ncriListPeriod: 1s\ncriGCPeriod: 15s\n", n.Containerd.Socket)}
		},
		AgentFiles: map[string]string{"ipam.conf": fmt.Sprintf("absentPodGracePeriod: %s\n", witnessGrace)},
		KSR:        ksr.Config{MirrorHeartbeat: witnessBeat},
	})
}

// TestRuntimeWitness runs the scenarios where only the container runtime
// knows that a pod lives, on one node whose agent asks containerd: a pod
// force-deleted while kubelet is away (6), contiv-ksr stopped for three
// grace periods while pods come and go (7), and the agent killed -9 in a
// burst of 30 pod creations (4).
func TestRuntimeWitness(t *testing.T) {
	n := witnessNode(t)
	for _, step := range []struct {
		name string
		run  func(*testing.T, *Node)
	}{
		{"a force-deleted pod keeps its address while its sandbox runs", forceDeleted},
		{"contiv-ksr stopped for three grace periods releases no running pod", ksrStopped},
		{"the agent killed in a burst of 30 pods", agentKilledInABurst},
		{"the agent's GC frees an ADD whose sandbox the runtime never had", leakedAdd},
	} {
		if !t.Run(step.name, func(t *testing.T) { step.run(t, n) }) {
			return
		}
	}
}

// forceDeleted (scenario 6): kubelet stopped, a running pod force-deleted
// from the API: contiv-ksr mirrors the delete, the pod is a release
// candidate, but its sandbox runs, so its address stays for three grace
// periods; kubelet back, it tears the sandbox down and the address is
// free.
func forceDeleted(t *testing.T, n *Node) {
	g := NewWithT(t)
	ctx := t.Context()
	g.Expect(n.CreatePod(ctx, BusyboxPod(ns, "orphan"))).To(Succeed())
	pods, err := n.WaitPodsRunning(ctx, ns, LabelApp+"=orphan", 1, time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	ip := pods[0].Status.PodIP
	key := ns + "/orphan"

	g.Expect(n.Kubelet.Stop()).To(Succeed())
	zero := int64(0)
	g.Expect(n.Kube.Client.CoreV1().Pods(ns).Delete(ctx, "orphan", metav1.DeleteOptions{GracePeriodSeconds: &zero})).To(Succeed())
	t0 := time.Now()
	g.Eventually(func() (bool, error) { return candidate(ctx, n, key) }, 3*witnessGrace, 200*time.Millisecond).
		Should(BeTrue(), "contiv-ksr mirrors the delete: a release candidate")
	t.Logf("force-deleted: a release candidate %s later", time.Since(t0).Round(time.Millisecond))
	g.Consistently(func() (map[string][]string, error) { return n.AllocatedIPs(ctx) }, 3*witnessGrace, time.Second).
		Should(HaveKeyWithValue(key, []string{ip}), "the sandbox runs: the address stays")
	g.Expect(sandboxLives(ctx, n, key)).To(BeTrue(), "the candidate is kept for its sandbox")
	running, err := readySandboxOf(ctx, n, "orphan")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(running).To(BeTrue(), "the sandbox still runs after three grace periods")

	g.Expect(n.Kubelet.Start()).To(Succeed())
	g.Expect(n.Kubelet.WaitHealthy(ctx, time.Minute)).To(Succeed())
	t0 = time.Now()
	g.Eventually(func() (map[string][]string, error) { return n.AllocatedIPs(ctx) }, 2*time.Minute, 500*time.Millisecond).
		ShouldNot(HaveKey(key), "kubelet back: the sandbox is torn down and the address freed")
	t.Logf("kubelet back: the address of the force-deleted pod free %s later", time.Since(t0).Round(time.Millisecond))
	g.Eventually(func() (bool, error) { return readySandboxOf(ctx, n, "orphan") }, time.Minute, 500*time.Millisecond).
		Should(BeFalse())
	g.Expect(n.WaitReady(ctx, true, readyBound)).To(Succeed())
}

// releaseCandidate is the agent's release candidate pod (nil: none).
func releaseCandidate(ctx context.Context, n *Node, pod string) (*ipam.ReleaseCandidate, error) {
	var rc ipam.ReleaseCandidates
	if err := cluster.GetJSON(ctx, n.Agent.REST+ipam.CandidatesPath, &rc); err != nil {
		return nil, err
	}
	for _, c := range rc.Candidates {
		if c.Pod == pod {
			return &c, nil
		}
	}
	return nil, nil
}

// candidate tells whether the agent lists pod as a release candidate.
func candidate(ctx context.Context, n *Node, pod string) (bool, error) {
	c, err := releaseCandidate(ctx, n, pod)
	return c != nil, err
}

// sandboxLives tells whether the agent lists pod as a release candidate
// that the runtime keeps.
func sandboxLives(ctx context.Context, n *Node, pod string) (bool, error) {
	c, err := releaseCandidate(ctx, n, pod)
	return c != nil && c.SandboxLives, err
}

// readySandboxOf tells whether containerd runs a ready sandbox of pod.
func readySandboxOf(ctx context.Context, n *Node, pod string) (bool, error) {
	sbs, err := n.Containerd.Sandboxes(ctx)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(sbs, func(s Sandbox) bool { return s.Metadata.Name == pod && s.State == "SANDBOX_READY" }), nil
}

// ksrStopped (scenario 7): contiv-ksr killed for three grace periods
// while pods are created and deleted: the agent's mirror goes stale, and
// no running pod loses its address, however long; contiv-ksr back, every
// running pod still has its address and nothing of the deleted ones is
// held.
func ksrStopped(t *testing.T, n *Node) {
	g := NewWithT(t)
	ctx := t.Context()
	g.Expect(n.CreateDeployment(ctx, BusyboxDeployment(ns, "steady", 4))).To(Succeed())
	_, err := n.WaitPodsRunning(ctx, ns, LabelApp+"=steady", 4, podsTimeout)
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(n.KSR.Kill()).To(Succeed())
	stop := watchRunningPods(t, n)
	end := time.Now().Add(3 * witnessGrace)
	for i := 0; time.Now().Before(end); i++ {
		name := fmt.Sprintf("churn-%d", i)
		g.Expect(n.CreatePod(ctx, BusyboxPod(ns, name))).To(Succeed())
		if i >= 2 {
			g.Expect(n.DeletePod(ctx, ns, fmt.Sprintf("churn-%d", i-2))).To(Succeed())
		}
		time.Sleep(witnessGrace / 3)
	}
	t.Logf("contiv-ksr down for %s while pods came and went", 3*witnessGrace)

	ksrAgain, err := n.Contiv.AddKSR(ctx, ksr.Config{MirrorHeartbeat: witnessBeat})
	g.Expect(err).NotTo(HaveOccurred())
	n.KSR = ksrAgain
	time.Sleep(2 * witnessGrace)
	stop()
	pods, err := n.Pods(ctx, ns, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() (map[string][]string, error) { return n.AllocatedIPs(ctx) }, time.Minute, time.Second).
		Should(HaveLen(len(pods)), "the deleted pods' addresses are free")
	pods, err = n.WaitPodsRunning(ctx, ns, "", len(pods), podsTimeout)
	g.Expect(err).NotTo(HaveOccurred())
	expectPodsMatchAgent(t, g, n, pods, podSubnet(t, n))

	g.Expect(n.DeleteDeployment(ctx, ns, "steady")).To(Succeed())
	for _, p := range pods {
		if strings.HasPrefix(p.Name, "churn-") {
			g.Expect(n.DeletePod(ctx, ns, p.Name)).To(Succeed())
		}
	}
	g.Expect(n.WaitNoPods(ctx, ns, "", 2*time.Minute)).To(Succeed())
	g.Eventually(func() (map[string][]string, error) { return n.AllocatedIPs(ctx) }, 30*time.Second, 200*time.Millisecond).
		Should(BeEmpty())
}

// watchRunningPods checks every second, until the returned function is
// called, that each running pod holds its status address at the agent:
// a violation fails the test.
func watchRunningPods(t *testing.T, n *Node) func() {
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Add(1)
	checks := 0
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if lost := lostAddresses(ctx, n); lost != "" && ctx.Err() == nil {
				t.Errorf("a running pod lost its address: %s", lost)
				return
			}
			checks++
		}
	}()
	return func() {
		cancel()
		wg.Wait()
		t.Logf("%d looks: every running pod held its address at the agent", checks)
	}
}

// lostAddresses names the running pods whose status address the agent
// does not hold for them ("": none; errors reading are not violations).
func lostAddresses(ctx context.Context, n *Node) string {
	pods, err := n.Pods(ctx, ns, "")
	if err != nil {
		return ""
	}
	allocs, err := n.AllocatedIPs(ctx)
	if err != nil {
		return ""
	}
	var lost []string
	for _, p := range pods {
		if !Running(p) || p.DeletionTimestamp != nil || p.Status.PodIP == "" {
			continue
		}
		if !slices.Contains(allocs[p.Namespace+"/"+p.Name], p.Status.PodIP) {
			lost = append(lost, p.Name+" "+p.Status.PodIP)
		}
	}
	return strings.Join(lost, ", ")
}

// agentKilledInABurst (scenario 4): a Deployment of 30 created, the agent
// killed -9 while its pods are being added, started again: every pod
// ends Running with a distinct address the agent holds for it; deleted,
// no allocation remains.
func agentKilledInABurst(t *testing.T, n *Node) {
	g := NewWithT(t)
	ctx := t.Context()
	g.Expect(n.CreateDeployment(ctx, BusyboxDeployment(ns, "burst", 30))).To(Succeed())
	allocs := 0
	g.Eventually(func() (int, error) {
		a, err := n.AllocatedIPs(ctx)
		allocs = len(a)
		return allocs, err
	}, time.Minute, 20*time.Millisecond).Should(BeNumerically(">=", 3), "the burst has begun")
	g.Expect(n.Agent.Kill()).To(Succeed())
	t.Logf("agent killed -9 with %d of 30 pods allocated", allocs)
	time.Sleep(2 * time.Second) // kubelet's ADDs fail meanwhile (code 11) and are retried
	g.Expect(n.StartAgent(ctx)).To(Succeed())
	rebuilt, err := lastRebuild(n.Agent.Log)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rebuilt["sandboxes"]).To(BeNumerically(">", 0), "the restarted agent listed containerd's sandboxes: %v", rebuilt)
	t.Logf("the restarted agent rebuilt its local pods from containerd: %v sandboxes, %v ready pods", rebuilt["sandboxes"], rebuilt["pods"])

	t0 := time.Now()
	pods, err := n.WaitPodsRunning(ctx, ns, LabelApp+"=burst", 30, podsTimeout)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("all 30 Running %s after the agent's restart", time.Since(t0).Round(time.Millisecond))
	g.Eventually(func(g Gomega) { expectPodsMatchAgent(t, g, n, pods, podSubnet(t, n)) }, 30*time.Second, time.Second).
		Should(Succeed())

	g.Expect(n.DeleteDeployment(ctx, ns, "burst")).To(Succeed())
	g.Expect(n.WaitNoPods(ctx, ns, "", 2*time.Minute)).To(Succeed())
	g.Eventually(func() (map[string][]string, error) { return n.AllocatedIPs(ctx) }, 30*time.Second, 200*time.Millisecond).
		Should(BeEmpty(), "no allocation once the burst is deleted")
}

// leakedAdd: a CNI ADD reaches the agent for a pod of the API, but the
// runtime never records its sandbox (it died mid-RunPodSandbox): no DEL
// ever comes, and the pod is not missing from this node's Kubernetes
// state (it is bound to this node, whose kubelet refuses to admit it: a
// node selector no node has, so no sandbox is ever made), so only the
// agent's GC against containerd's list frees it, two lists a criGCPeriod
// apart. A running pod keeps its own.
func leakedAdd(t *testing.T, n *Node) {
	g := NewWithT(t)
	ctx := t.Context()
	g.Expect(n.CreatePod(ctx, BusyboxPod(ns, "alive"))).To(Succeed())
	_, err := n.WaitPodsRunning(ctx, ns, LabelApp+"=alive", 1, time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	ghost := BusyboxPod(ns, "ghost")
	ghost.Spec.NodeName = n.Name // in this node's state (contiv-ksr's per-node layout), never run here
	ghost.Spec.NodeSelector = map[string]string{"contiv.test/no-such-node": "true"}
	g.Expect(n.CreatePod(ctx, ghost)).To(Succeed())
	p, err := n.Kube.Client.CoreV1().Pods(ns).Get(ctx, "ghost", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	conn, err := grpc.NewClient("unix://"+n.Agent.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = conn.Close() }()
	reply, err := cni.NewRemoteCNIClient(conn).Add(ctx, &cni.CNIRequest{
		Version: "1.1.0", ContainerId: "leaked-sandbox", NetworkNamespace: "/var/run/netns/leaked", InterfaceName: "eth0",
		ExtraNwConfig:  `{"cniVersion":"1.1.0","name":"` + n.Network + `","type":"contiv-cni"}`,
		ExtraArguments: fmt.Sprintf("IgnoreUnknown=1;K8S_POD_NAMESPACE=%s;K8S_POD_NAME=ghost;K8S_POD_UID=%s", ns, p.UID),
		NetworkName:    n.Network,
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reply.GetResult()).To(Equal(cni.CNIReply_OK), reply.GetError())
	g.Expect(n.AllocatedIPs(ctx)).To(HaveKey(ns + "/ghost"))

	t0 := time.Now()
	g.Eventually(func() (map[string][]string, error) { return n.AllocatedIPs(ctx) }, time.Minute, 200*time.Millisecond).
		ShouldNot(HaveKey(ns+"/ghost"), "no sandbox at two lists a GC period apart")
	t.Logf("the leaked ADD freed by the agent's GC %s later", time.Since(t0).Round(time.Millisecond))
	g.Expect(metricValue(ctx, n, `contiv_ipam_pod_ips_released_total{reason="runtime"}`)).To(Equal(1.0))
	g.Expect(n.AllocatedIPs(ctx)).To(HaveKey(ns+"/alive"), "the running pod keeps its address")

	g.Expect(n.DeletePod(ctx, ns, "alive")).To(Succeed())
	zero := int64(0) // the kubelet refused it: nothing finishes a graceful delete
	g.Expect(n.Kube.Client.CoreV1().Pods(ns).Delete(ctx, "ghost", metav1.DeleteOptions{GracePeriodSeconds: &zero})).To(Succeed())
	g.Expect(n.WaitNoPods(ctx, ns, "", time.Minute)).To(Succeed())
}

// metricValue reads one sample of the agent's /metrics ("name{labels}"
// as the text format writes it); -1 when it is not there.
func metricValue(ctx context.Context, n *Node, sample string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.Agent.REST+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return -1, nil
}

// lastRebuild is the agent's last "local pods rebuilt" log record.
func lastRebuild(logPath string) (map[string]any, error) {
	data, err := os.ReadFile(logPath)
	if err != nil {
		return nil, err
	}
	var last map[string]any
	for _, line := range strings.Split(string(data), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "local pods rebuilt from the container runtime's sandboxes" {
			last = rec
		}
	}
	if last == nil {
		return nil, fmt.Errorf("%s: no record of local pods rebuilt from the container runtime", logPath)
	}
	return last, nil
}
