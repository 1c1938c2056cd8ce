package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	ipamkeeper "github.com/contiv-ipam/agent/plugins/ipam/keeper"
	"github.com/contiv-ipam/agent/plugins/ksr"
	"github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/podmanager/cni"
	"github.com/contiv-ipam/agent/tests/cluster"
	"github.com/contiv-ipam/agent/tests/kubeenv"
)

// The grace period and contiv-ksr's heartbeat of the evidence scenario.
const (
	evidenceGrace = 3 * time.Second
	evidenceBeat  = 300 * time.Millisecond
)

// cniAdd connects pod ns/name (UID uid) through the agent's CNI socket,
// as kubelet's runtime does, and returns its address.
func cniAdd(t *testing.T, a *cluster.Agent, ns, name, uid string) string {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+a.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	cid := "sandbox-" + name
	reply, err := cni.NewRemoteCNIClient(conn).Add(ctx, &cni.CNIRequest{
		Version: "1.1.0", ContainerId: cid, NetworkNamespace: "/var/run/netns/" + cid, InterfaceName: "eth0",
		ExtraNwConfig:  `{"cniVersion":"1.1.0","name":"k8s-pod-network","type":"contiv-cni"}`,
		ExtraArguments: fmt.Sprintf("IgnoreUnknown=1;K8S_POD_NAMESPACE=%s;K8S_POD_NAME=%s;K8S_POD_UID=%s", ns, name, uid),
		NetworkName:    "k8s-pod-network",
	})
	if err != nil || reply.GetResult() != cni.CNIReply_OK {
		t.Fatalf("CNI ADD of %s/%s: %v %s", ns, name, err, reply.GetError())
	}
	ifs := reply.GetInterfaces()
	if len(ifs) != 1 || len(ifs[0].GetIpAddresses()) != 1 {
		t.Fatalf("CNI ADD of %s/%s: interfaces %v", ns, name, ifs)
	}
	return netip.MustParsePrefix(ifs[0].GetIpAddresses()[0].GetAddress()).Addr().String()
}

// With contiv-ksr stopped for three grace periods while pods are created
// and deleted through the API, no pod loses its address (no fresh mirror:
// no evidence); once contiv-ksr runs again, the addresses of the deleted
// pods are freed within about one grace period and the running pods keep
// theirs.
func TestAStoppedMirrorReleasesNothingAndCatchesUp(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := t.Context()
	kube := kubeenv.StartT(t)
	c := cluster.StartT(t, cluster.TestBins(t), kube.Kubeconfig)
	conf := ksr.Config{MirrorHeartbeat: evidenceBeat}
	k1 := c.AddKSRT(t, conf)
	cli := c.ClientT(t)
	createNode(t, kube, "node-a", "")
	a := c.AddAgentT(t, cluster.AgentOptions{Node: "node-a",
		Conf: map[string]string{"ipam.conf": fmt.Sprintf("absentPodGracePeriod: %s\n", evidenceGrace)}})

	ips := map[string]string{}
	for _, name := range []string{"run-1", "run-2"} {
		ips["default/"+name] = cniAdd(t, a, "default", name, createPod(t, kube, "default", name, "node-a", ""))
	}
	g.Eventually(mirrored).WithContext(ctx).WithArguments(cli).WithTimeout(15 * time.Second).Should(And(
		HaveKey(pod.NodeKey("node-a", "run-1", "default")), HaveKey(pod.NodeKey("node-a", "run-2", "default"))))

	g.Expect(k1.Kill()).To(Succeed()) // contiv-ksr is gone: its marker goes stale
	for _, name := range []string{"new-1", "new-2"} {
		ips["default/"+name] = cniAdd(t, a, "default", name, createPod(t, kube, "default", name, "node-a", ""))
	}
	deletePod(t, kube, "default", "run-2") // force-deleted; its sandbox is gone without a DEL
	deletePod(t, kube, "default", "new-2")
	g.Consistently(podIPs(ctx, a)).WithTimeout(3*evidenceGrace).WithPolling(200*time.Millisecond).Should(Equal(ips),
		"no fresh mirror: no pod loses its address")

	c.AddKSRT(t, conf)
	resumed := time.Now()
	running := map[string]string{"default/run-1": ips["default/run-1"], "default/new-1": ips["default/new-1"]}
	g.Eventually(podIPs(ctx, a)).WithTimeout(evidenceGrace+10*time.Second).WithPolling(100*time.Millisecond).Should(Equal(running),
		"the deleted pods' addresses are freed once a fresh mirror misses them twice")
	took := time.Since(resumed)
	t.Logf("contiv-ksr resumed: the deleted pods' addresses were free %s later (grace period %s, heartbeat %s)",
		took.Round(10*time.Millisecond), evidenceGrace, evidenceBeat)
	g.Expect(took).To(BeNumerically(">=", evidenceGrace), "released only after a grace period of fresh evidence")
	g.Consistently(podIPs(ctx, a)).WithTimeout(2*evidenceGrace).Should(Equal(running), "the running pods keep theirs")
}

// EnvFigureDefaults makes TestForceDeletedPodIsFreeAfterTheGracePeriod run
// with the shipped defaults (absentPodGracePeriod 10m, mirrorHeartbeat
// 10s): about 11 minutes (`make figure-force-delete`).
const EnvFigureDefaults = "EVIDENCE_FIGURE_DEFAULTS"

// A pod force-deleted through the API whose sandbox no DEL tears down
// (a node that rebooted) is free one grace period after contiv-ksr
// mirrors its deletion, give or take a heartbeat. Figure: the time from
// the force deletion to the address being free.
func TestForceDeletedPodIsFreeAfterTheGracePeriod(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := t.Context()
	grace, beat := 2*time.Second, 200*time.Millisecond
	if os.Getenv(EnvFigureDefaults) != "" {
		grace, beat = ipamkeeper.DefaultConfig().AbsentPodGracePeriod, ksr.DefaultMirrorHeartbeat
	}
	kube := kubeenv.StartT(t)
	c := cluster.StartT(t, cluster.TestBins(t), kube.Kubeconfig)
	c.AddKSRT(t, ksr.Config{MirrorHeartbeat: beat})
	cli := c.ClientT(t)
	createNode(t, kube, "node-a", "")
	a := c.AddAgentT(t, cluster.AgentOptions{Node: "node-a",
		Conf: map[string]string{"ipam.conf": fmt.Sprintf("absentPodGracePeriod: %s\n", grace)}})
	ip := cniAdd(t, a, "default", "web", createPod(t, kube, "default", "web", "node-a", ""))
	g.Eventually(mirrored).WithContext(ctx).WithArguments(cli).WithTimeout(15 * time.Second).Should(HaveKey(pod.NodeKey("node-a", "web", "default")))
	time.Sleep(3 * beat) // a heartbeat after the allocation: the mirror has seen it

	deleted := time.Now()
	deletePod(t, kube, "default", "web")
	g.Eventually(podIPs(ctx, a)).WithTimeout(grace + 30*time.Second).WithPolling(50 * time.Millisecond).
		ShouldNot(HaveKey("default/web"))
	took := time.Since(deleted)
	t.Logf("force-deleted pod's address %s free %s after the deletion (absentPodGracePeriod %s, mirrorHeartbeat %s)",
		ip, took.Round(10*time.Millisecond), grace, beat)
	g.Expect(took).To(BeNumerically(">=", grace))
	g.Expect(took).To(BeNumerically("<", grace+3*beat+10*time.Second))
}
