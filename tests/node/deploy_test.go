//go:build node

package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// Bounds of scenario 9 (generous; the figures are logged).
const (
	// deployTimeout bounds each wait of the deployment: pods ready, the
	// node Ready, pods gone.
	deployTimeout = 2 * time.Minute
	// deployReplicas is the size of the busybox Deployment.
	deployReplicas = 10
)

// machinePaths are the machine's paths k8s/ writes as shipped (hostPaths,
// the conflist, the CNI binary) and those the image build, ptp's ipMasq
// and the runtime could write: the deployment must leave each as it was.
var machinePaths = []string{"/opt/cni", "/etc/cni", "/var/run/contiv", "/run/contiv", "/var/lib/contiv",
	"/var/lib/contiv-etcd", "/run/containerd", "/run/xtables.lock", "/var/lib/containers", "/run/containers"}

// snapshotMachine lists every file under machinePaths with its mode,
// size and modification time (a path's absence too).
func snapshotMachine(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, root := range machinePaths {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					out = append(out, p+" absent")
					return nil
				}
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			out = append(out, fmt.Sprintf("%s %s %d %s", p, info.Mode(), info.Size(), info.ModTime().Format(time.RFC3339Nano)))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// deployment is what the steps of TestDeployment share.
type deployment struct {
	n        *Node
	d        *Deployed
	build    *ImageBuild
	archives map[string]string
	subnet   netip.Prefix
	ksr      []corev1.Pod
}

// Scenario 9, the shipped deployment on a real node: `make images`
// builds the images of docker/ (buildah, no registry) while a node
// starts without Contiv (Options.NoContiv: NotReady, no CNI config); the
// test imports them, writes an overlay of k8s/ that only moves the
// hostPaths into the node's directories and stands in for kube-proxy,
// cluster DNS and the service account admission (deploy.go), and
// applies it. Then: contiv-etcd, contiv-agent and both contiv-ksr pods
// run and are Ready; the agent's init container installed contiv-cni
// and the conflist into the node's CNI directories (its log, the files,
// the conflist's grpcServer the agent's socket); the Node turns Ready;
// contiv-ksr's pods (pod network) and a Deployment of busybox pods get
// their addresses from the deployed agent; deleting them frees every
// address; the node stops with nothing left on the machine, whose
// /opt/cni, /etc/cni, /var/lib/contiv* and /var/run/contiv are as they
// were.
func TestDeployment(t *testing.T) {
	before := snapshotMachine(t)
	build, err := StartMakeImages(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(build.Stop)
	start := time.Now()
	n := StartT(t, Options{NoContiv: true})
	t.Logf("node %s registered in %s (API server %s, containerd %s)", n.Name, n.Timings.Total.Round(time.Millisecond),
		n.Timings.APIServer.Round(time.Millisecond), n.Timings.Containerd.Round(time.Millisecond))
	t0 := time.Now()
	archives, took, err := build.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("make images: %s (started with the node; waited %s more)", took.Round(time.Millisecond),
		time.Since(t0).Round(time.Millisecond))
	s := &deployment{n: n, build: build, archives: archives}
	t.Cleanup(func() { // before the node's Stop (cleanups run last first)
		if s.d != nil && !n.stopped {
			if err := s.d.StopPodNetwork(context.Background()); err != nil {
				t.Errorf("remove the pod-network sandboxes: %v", err)
			}
			_ = s.d.Close()
		}
	})
	for _, step := range []struct {
		name string
		run  func(*testing.T, *deployment)
	}{
		{"the node is NotReady without a CNI config", notReadyWithoutCNI},
		{"k8s/ renders with the node's directories and the built images", deployManifests},
		{"contiv-etcd, contiv-agent and contiv-ksr run and are ready", componentsReady},
		{"the init container installed contiv-cni and the conflist", cniInstalled},
		{"the node turns Ready", nodeTurnsReady},
		{"contiv-ksr's pods have the agent's addresses", ksrAddresses},
		{"new pods get their addresses from the deployed agent", busyboxAddresses},
		{"deleting the pods frees every address", deleteFreesAll},
	} {
		t0 := time.Now()
		ok := t.Run(step.name, func(t *testing.T) { step.run(t, s) })
		t.Logf("%s: %s", step.name, time.Since(t0).Round(time.Millisecond))
		if !ok {
			return
		}
	}
	t.Run("stop leaves nothing behind", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(s.d.StopPodNetwork(t.Context())).To(Succeed())
		g.Expect(s.d.Close()).To(Succeed())
		g.Expect(n.Stop()).To(Succeed())
		g.Expect(n.Leftovers()).To(BeEmpty())
		g.Expect(processesNaming(n.RunDir, n.Dir)).To(BeEmpty())
		g.Expect(snapshotMachine(t)).To(Equal(before), "the machine's CNI, Contiv and container directories")
	})
	t.Logf("scenario 9 in %s", time.Since(start).Round(time.Millisecond))
}

// notReadyWithoutCNI: kubelet registered the Node, NotReady: the runtime
// has no network.
func notReadyWithoutCNI(t *testing.T, s *deployment) {
	g := NewWithT(t)
	ready, msg, err := s.n.NodeReady(t.Context())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ready).To(BeFalse())
	g.Expect(msg).To(ContainSubstring("NetworkReady=false"))
	entries, err := os.ReadDir(s.n.CNIConfDir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(BeEmpty(), "no conflist before the deployment")
	g.Expect(filepath.Join(s.n.CNIBinDir, "contiv-cni")).NotTo(BeAnExistingFile())
}

// deployManifests deploys k8s/ and checks what was applied: every
// hostPath under the node's directories, the images those make images
// built, the conflist's socket the agent's socket directory on the node.
func deployManifests(t *testing.T, s *deployment) {
	g := NewWithT(t)
	d, err := s.n.Deploy(t.Context(), DeployOptions{Archives: s.archives})
	g.Expect(err).NotTo(HaveOccurred())
	s.d = d // TestDeployment closes it
	t.Logf("applied %s; hostPaths: %v; Services served in %s: %v; agent REST %s", d.Rendered, d.HostPaths, s.n.NetNS,
		d.Services, d.AgentREST)
	g.Expect(d.HostPathsOutside()).To(BeEmpty())
	g.Expect(d.HostPaths).To(HaveKeyWithValue("/opt/cni/bin", s.n.CNIBinDir))
	g.Expect(d.HostPaths).To(HaveKeyWithValue("/etc/cni/net.d", s.n.CNIConfDir))
	imported := map[string]bool{}
	for _, name := range d.Images {
		imported[name] = true
	}
	for _, w := range []string{"contiv-agent", "contiv-ksr", "contiv-etcd"} {
		spec := d.Workload(w)
		g.Expect(spec).NotTo(BeNil(), w)
		for _, c := range append(spec.InitContainers, spec.Containers...) {
			g.Expect(imported).To(HaveKey(c.Image), "%s container %s runs an image the test imported", w, c.Name)
		}
	}
	agentArchive, err := ArchiveImageName(s.archives["contiv-agent"])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Workload("contiv-agent").Containers[0].Image).To(Equal(agentArchive), "k8s/ deploys the agent image make images built")
	g.Expect(d.CNISocket).To(Equal(filepath.Join(d.HostPaths["/var/run/contiv"], "cni.sock")))
}

// componentsReady waits for every pod of k8s/ to be Ready.
func componentsReady(t *testing.T, s *deployment) {
	g := NewWithT(t)
	for _, c := range []struct {
		name  string
		count int
	}{{"contiv-etcd", 1}, {"contiv-agent", 1}, {"contiv-ksr", ksrReplicas(s.d)}} {
		t0 := time.Now()
		pods, err := s.n.WaitPodsReady(t.Context(), "kube-system", LabelName+"="+c.name, c.count, deployTimeout)
		g.Expect(err).NotTo(HaveOccurred())
		t.Logf("%s: %d pods ready after %s more", c.name, len(pods), time.Since(t0).Round(time.Millisecond))
		for _, p := range pods {
			g.Expect(p.Spec.NodeName).To(Equal(s.n.Name))
			if c.name == "contiv-ksr" {
				s.ksr = append(s.ksr, p)
			}
		}
	}
}

// ksrReplicas is the replica count k8s/ gives contiv-ksr.
func ksrReplicas(d *Deployed) int {
	for _, o := range d.Objects {
		if dep, ok := o.(*appsv1.Deployment); ok && dep.Name == "contiv-ksr" && dep.Spec.Replicas != nil {
			return int(*dep.Spec.Replicas)
		}
	}
	return 1
}

// cniInstalled: the install-cni init container ended with 0 and says it
// installed both files, which are in the node's CNI directories: the
// contiv-cni make static built, the conflist with the node's network
// name and the agent's socket, where the agent listens.
func cniInstalled(t *testing.T, s *deployment) {
	g := NewWithT(t)
	pods, err := s.n.Pods(t.Context(), "kube-system", LabelName+"=contiv-agent")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pods).To(HaveLen(1))
	agent := pods[0]
	g.Expect(agent.Status.InitContainerStatuses).To(HaveLen(1))
	st := agent.Status.InitContainerStatuses[0]
	g.Expect(st.Name).To(Equal("install-cni"))
	g.Expect(st.State.Terminated).NotTo(BeNil(), "install-cni ended")
	g.Expect(st.State.Terminated.ExitCode).To(BeZero())
	logs := containerLog(g, s.n, agent, "install-cni")
	t.Logf("install-cni's log:\n%s", logs)
	g.Expect(logs).To(ContainSubstring("installed /host/etc/cni/net.d/10-contiv.conflist"))
	g.Expect(logs).To(ContainSubstring("installed /host/opt/cni/bin/contiv-cni"))

	installed, err := os.ReadFile(filepath.Join(s.n.CNIBinDir, "contiv-cni"))
	g.Expect(err).NotTo(HaveOccurred())
	built, err := os.ReadFile(filepath.Join(s.build.StaticDir, "contiv-cni"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(bytes.Equal(installed, built)).To(BeTrue(), "the node's contiv-cni is the image's (make static's)")
	info, err := os.Stat(filepath.Join(s.n.CNIBinDir, "contiv-cni"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.Mode().Perm()).To(Equal(os.FileMode(0o755)))
	leftovers, err := filepath.Glob(filepath.Join(s.n.CNIBinDir, ".*"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(leftovers).To(BeEmpty(), "no temporary file of the install")

	raw, err := os.ReadFile(filepath.Join(s.n.CNIConfDir, "10-contiv.conflist"))
	g.Expect(err).NotTo(HaveOccurred())
	var conf struct {
		CNIVersion string `json:"cniVersion"`
		Name       string `json:"name"`
		Plugins    []struct {
			Type string `json:"type"`
			IPAM struct {
				Type       string `json:"type"`
				GRPCServer string `json:"grpcServer"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	g.Expect(json.Unmarshal(raw, &conf)).To(Succeed())
	g.Expect(conf.CNIVersion).To(Equal("1.1.0"))
	g.Expect(conf.Name).To(Equal(s.n.Network))
	g.Expect(conf.Plugins).NotTo(BeEmpty())
	g.Expect(conf.Plugins[0].Type).To(Equal("ptp"))
	g.Expect(conf.Plugins[0].IPAM.Type).To(Equal("contiv-cni"))
	g.Expect(conf.Plugins[0].IPAM.GRPCServer).To(Equal(s.d.CNISocket))
	sock, err := os.Stat(s.d.CNISocket)
	g.Expect(err).NotTo(HaveOccurred(), "the agent's socket on the node")
	g.Expect(sock.Mode().Type()).To(Equal(fs.ModeSocket))
	for _, p := range conf.Plugins {
		g.Expect(filepath.Join(s.n.CNIBinDir, p.Type)).To(BeAnExistingFile(), "plugin %s of the conflist", p.Type)
	}
}

// nodeTurnsReady: with the conflist and the agent ready, the runtime's
// network is ready (CNI STATUS through ptp and contiv-cni) and so is the
// Node.
func nodeTurnsReady(t *testing.T, s *deployment) {
	g := NewWithT(t)
	g.Expect(s.n.WaitReady(t.Context(), true, deployTimeout)).To(Succeed())
	var err error
	s.subnet, err = deployedSubnet(t.Context(), s.d)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("the deployed agent's podSubnetThisNode: %s", s.subnet)
}

// deployedSubnet is the deployed agent's podSubnetThisNode.
func deployedSubnet(ctx context.Context, d *Deployed) (netip.Prefix, error) {
	info, err := d.NodeIPAM(ctx)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.ParsePrefix(info.PodSubnetThisNode)
}

// ksrAddresses: contiv-ksr runs in the pod network, so its pods got
// their addresses from the agent too; each reached the API server with
// its in-cluster config (the kubernetes Service, its service account)
// and synced its informers, and one of them, the leader, mirrored the
// state into contiv-etcd (the contiv-etcd Service by its DNS name).
func ksrAddresses(t *testing.T, s *deployment) {
	g := NewWithT(t)
	pods, err := s.n.Pods(t.Context(), "kube-system", LabelName+"=contiv-ksr")
	g.Expect(err).NotTo(HaveOccurred())
	for _, p := range pods {
		g.Expect(p.Spec.HostNetwork).To(BeFalse())
	}
	expectDeployedAddresses(t, g, s, pods)
	g.Eventually(func(g Gomega) {
		leaders := 0
		for _, p := range pods {
			log := containerLog(g, s.n, p, "contiv-ksr")
			g.Expect(log).To(ContainSubstring(`kubeconfig="in-cluster service account"`))
			g.Expect(log).To(ContainSubstring("host=https://" + s.d.Services["kubernetes"]))
			g.Expect(log).To(ContainSubstring("informers synced"))
			g.Expect(log).NotTo(ContainSubstring("forbidden"))
			if strings.Contains(log, "resync done") {
				leaders++
			}
		}
		g.Expect(leaders).To(BeNumerically(">=", 1), "the leader mirrored the state")
	}).WithTimeout(30 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
}

// containerLog is kubelet's log of a container of a pod (every run of
// it): what kubectl logs would return, read from kubelet's podLogsDir
// (the API server cannot reach this kubelet: HostNetworkIP).
func containerLog(g Gomega, n *Node, p corev1.Pod, container string) string {
	files, err := filepath.Glob(filepath.Join(n.Kubelet.PodLogsDir, p.Namespace+"_"+p.Name+"_"+string(p.UID), container, "*.log"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files).NotTo(BeEmpty(), "logs of %s/%s %s", p.Namespace, p.Name, container)
	var out strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		g.Expect(err).NotTo(HaveOccurred())
		out.Write(data)
	}
	return out.String()
}

// busyboxAddresses: a Deployment of busybox pods runs, each with the
// deployed agent's address, and one pod reaches another.
func busyboxAddresses(t *testing.T, s *deployment) {
	g := NewWithT(t)
	ctx := t.Context()
	g.Expect(s.n.CreateDeployment(ctx, BusyboxDeployment(ns, "web", deployReplicas))).To(Succeed())
	t0 := time.Now()
	pods, err := s.n.WaitPodsRunning(ctx, ns, LabelApp+"=web", deployReplicas, deployTimeout)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("%d busybox pods running in %s", len(pods), time.Since(t0).Round(time.Millisecond))
	expectDeployedAddresses(t, g, s, append(pods, s.ksrPods(t)...))
	g.Expect(s.n.Ping(ctx, pods[0], pods[1].Status.PodIP)).To(Succeed())
}

// ksrPods are contiv-ksr's pods now.
func (s *deployment) ksrPods(t *testing.T) []corev1.Pod {
	t.Helper()
	pods, err := s.n.Pods(t.Context(), "kube-system", LabelName+"=contiv-ksr")
	if err != nil {
		t.Fatal(err)
	}
	return pods
}

// expectDeployedAddresses: each pod runs with status.podIP equal to the
// deployed agent's allocation for it, distinct, in its
// podSubnetThisNode, and the agent holds nothing else.
func expectDeployedAddresses(t *testing.T, g Gomega, s *deployment, pods []corev1.Pod) {
	t.Helper()
	allocs, err := s.d.AllocatedIPs(t.Context())
	g.Expect(err).NotTo(HaveOccurred())
	seen := map[string]string{}
	for _, p := range pods {
		key := p.Namespace + "/" + p.Name
		g.Expect(Running(p)).To(BeTrue(), "pod %s: %s", key, p.Status.Phase)
		g.Expect(allocs).To(HaveKeyWithValue(key, ConsistOf(p.Status.PodIP)), "the deployed agent's allocation of %s", key)
		a, err := netip.ParseAddr(p.Status.PodIP)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(s.subnet.Contains(a)).To(BeTrue(), "pod %s: %s in %s", key, a, s.subnet)
		g.Expect(seen).NotTo(HaveKey(p.Status.PodIP), "%s of %s is also %s's", p.Status.PodIP, key, seen[p.Status.PodIP])
		seen[p.Status.PodIP] = key
	}
	g.Expect(allocs).To(HaveLen(len(pods)), "the agent holds an address for each pod and no other: %v", allocs)
}

// deleteFreesAll: deleting the busybox Deployment frees its addresses
// (contiv-ksr's stay), deleting contiv-ksr's frees theirs: the agent
// holds none.
func deleteFreesAll(t *testing.T, s *deployment) {
	g := NewWithT(t)
	ctx := t.Context()
	g.Expect(s.n.DeleteDeployment(ctx, ns, "web")).To(Succeed())
	g.Expect(s.n.WaitNoPods(ctx, ns, LabelApp+"=web", deployTimeout)).To(Succeed())
	g.Eventually(func(g Gomega) {
		allocs, err := s.d.AllocatedIPs(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(allocs).To(HaveLen(len(s.ksr)), "only contiv-ksr's: %v", allocs)
		for key := range allocs {
			g.Expect(key).To(HavePrefix("kube-system/contiv-ksr-"))
		}
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	g.Expect(s.n.DeleteDeployment(ctx, "kube-system", "contiv-ksr")).To(Succeed())
	g.Expect(s.n.WaitNoPods(ctx, "kube-system", LabelName+"=contiv-ksr", deployTimeout)).To(Succeed())
	g.Eventually(func(g Gomega) {
		allocs, err := s.d.AllocatedIPs(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(allocs).To(BeEmpty())
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	sandboxes, err := s.n.Containerd.Sandboxes(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	var names []string
	for _, sb := range sandboxes {
		if sb.State == "SANDBOX_READY" {
			names = append(names, sb.Metadata.Namespace+"/"+sb.Metadata.Name)
		}
	}
	g.Expect(strings.Join(names, " ")).NotTo(ContainSubstring("contiv-ksr"), "contiv-ksr's sandboxes are gone")
}
