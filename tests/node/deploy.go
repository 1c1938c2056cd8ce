//go:build node

package node

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/contiv-ipam/agent/plugins/ipam"
	"github.com/contiv-ipam/agent/tests/cluster"
	"github.com/contiv-ipam/agent/tests/kubeenv"
)

// Deploying k8s/ on a node (Options.NoContiv): the shipped manifests
// with the patches a node of this machine needs and nothing else. What
// the overlay Deploy writes changes, and why:
//
//   - every hostPath: into the node's directories (the CNI ones are
//     containerd's, /run/containerd is the node's containerd socket
//     directory, the others go under Dir/host), never the machine's;
//     the conflist's grpcServer follows the agent's socket directory, and
//     its network name is the node's (the harness removes that network's
//     CNI cache entries);
//   - the etcd image: envtest's etcd server of the same version in an
//     image of the test's (no registry);
//   - the contiv-etcd Service gets a fixed cluster IP, served in the
//     node's namespace (services.go; no kube-proxy), and the pod-network
//     pods get its DNS names as hostAliases (no cluster DNS);
//   - pods with a service account get its files (a token of a
//     TokenRequest, the CA of the API server proxy, the namespace) from a
//     host directory at the path the ServiceAccount admission plugin
//     would mount them: the API server runs without that plugin and no
//     token controller; a hostPath because kubelet's own tmpfs mounts
//     (projected volumes) stay in its private mount namespace.
//
// The container paths, the configuration files of the agent and of
// contiv-ksr, the probes, the security contexts and the tolerations stay
// as shipped.

// Names of k8s/.
const (
	// LabelName is the label k8s/ selects its pods by.
	LabelName = "app.kubernetes.io/name"
	// ControlPlaneLabel is the label of the nodes contiv-etcd runs on.
	ControlPlaneLabel = "node-role.kubernetes.io/control-plane"
	// serviceAccountDir is where a pod finds its service account's token,
	// ca.crt and namespace (rest.InClusterConfig reads them there).
	serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"
	// serviceAccountVolume names that volume in the pods.
	serviceAccountVolume = "kube-api-access"
)

// DeployOptions shape Deploy.
type DeployOptions struct {
	// K8sDir is the kustomization to deploy; default the repository's k8s/.
	K8sDir string
	// Archives are OCI archives to import before (ImageBuild.Wait's).
	Archives map[string]string
}

// Deployed is k8s/ deployed on a node by Deploy, with what the test
// serves for it in the node's network namespace. It belongs to the
// goroutine that deployed it; Close stops what it serves (the node's
// Stop removes the rest).
type Deployed struct {
	// Dir holds base/ (the copy of k8s/), overlay/, rendered.yaml, the
	// host directories (host/) and the service account files.
	Dir string
	// Rendered is the file of the manifests applied (kubectl kustomize
	// of the overlay); Objects are its objects.
	Rendered string
	Objects  []runtime.Object
	// HostPaths maps each hostPath of k8s/ to its directory on the node.
	HostPaths map[string]string
	// CNISocket is the conflist's grpcServer: the agent's socket as
	// contiv-cni, run by containerd, dials it.
	CNISocket string
	// Network is the conflist's network name.
	Network string
	// AgentREST is the agent's REST API ("http://127.0.0.1:<port>", on
	// the machine's loopback: a Bridge to where kubelet probes it in the
	// node's namespace).
	AgentREST string
	// Images are the names of the imported images, by archive.
	Images map[string]string
	// Services are the cluster IPs and ports served in the node's
	// namespace, by Service name (kubernetes, contiv-etcd).
	Services map[string]string

	n       *Node
	base    *manifestSet
	closers []io.Closer
}

// manifestSet is a rendered kustomization: each document and its object.
type manifestSet struct {
	docs    [][]byte
	objects []runtime.Object
}

// workload is a pod template of a manifest set.
type workload struct {
	kind, name, namespace string
	spec                  *corev1.PodSpec
	labels                map[string]string
}

// Deploy imports the archives and an etcd image, puts portmap into the
// CNI bin directory, labels the node as a control-plane node, writes an
// overlay of a copy of k8s/ (the patches above), renders it with kubectl
// kustomize, starts what it serves in the node's namespace and applies
// it with kubectl. It returns once everything is applied, not running.
func (n *Node) Deploy(ctx context.Context, o DeployOptions) (*Deployed, error) {
	if !n.opts.NoContiv {
		return nil, errors.New("node: Deploy needs a node started with Options.NoContiv")
	}
	if o.K8sDir == "" {
		o.K8sDir = filepath.Join(kubeenv.RepoRoot(), "k8s")
	}
	d := &Deployed{Dir: filepath.Join(n.Dir, "deploy"), HostPaths: map[string]string{}, Images: map[string]string{},
		Services: map[string]string{}, Network: n.Network, n: n}
	if err := d.deploy(ctx, o); err != nil {
		return nil, errors.Join(fmt.Errorf("node: deploy %s: %w", o.K8sDir, err), d.Close())
	}
	return d, nil
}

// deploy runs Deploy's steps.
func (d *Deployed) deploy(ctx context.Context, o DeployOptions) error {
	if err := d.prepareNode(ctx, o.Archives); err != nil {
		return err
	}
	base := filepath.Join(d.Dir, "base")
	if err := os.CopyFS(base, os.DirFS(o.K8sDir)); err != nil {
		return fmt.Errorf("copy k8s/: %w", err)
	}
	var err error
	if d.base, err = d.render(ctx, base); err != nil {
		return err
	}
	if err := d.writeOverlay(ctx, base); err != nil {
		return err
	}
	overlay := filepath.Join(d.Dir, "overlay")
	set, err := d.render(ctx, overlay)
	if err != nil {
		return err
	}
	d.Objects = set.objects
	d.Rendered = filepath.Join(d.Dir, "rendered.yaml")
	if err := os.WriteFile(d.Rendered, bytes.Join(set.docs, []byte("---\n")), 0o644); err != nil {
		return err
	}
	if outside := d.HostPathsOutside(); len(outside) > 0 {
		return fmt.Errorf("hostPaths outside the node's directories after the patches: %v", outside)
	}
	if err := d.serve(); err != nil {
		return err
	}
	return d.apply(ctx, set)
}

// prepareNode imports the images, adds portmap and labels the node.
func (d *Deployed) prepareNode(ctx context.Context, archives map[string]string) error {
	n := d.n
	etcd, _, err := BuildEtcdImage(filepath.Join(d.Dir, "images"))
	if err != nil {
		return err
	}
	all := []string{etcd}
	for _, a := range archives {
		all = append(all, a)
	}
	slices.Sort(all)
	for _, a := range all {
		name, err := ArchiveImageName(a)
		if err != nil {
			return err
		}
		if err := n.ImportImage(ctx, a); err != nil {
			return err
		}
		d.Images[a] = name
	}
	portmap, err := n.Portmap(filepath.Join(d.Dir, "portmap"))
	if err != nil {
		return err
	}
	if err := copyFile(portmap, filepath.Join(n.CNIBinDir, "portmap")); err != nil {
		return err
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:""}}}`, ControlPlaneLabel)
	out, err := n.Kube.KubectlCmd(ctx, "patch", "node", n.Name, "--type=merge", "-p", patch).CombinedOutput()
	if err != nil {
		return fmt.Errorf("label node %s: %w: %s", n.Name, err, out)
	}
	return nil
}

// render runs kubectl kustomize on dir and decodes the output.
func (d *Deployed) render(ctx context.Context, dir string) (*manifestSet, error) {
	cmd := exec.CommandContext(ctx, d.n.Kube.Kubectl, "kustomize", dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("kubectl kustomize %s: %w: %s", dir, err, stderr.String())
	}
	return decodeManifests(out)
}

// decodeManifests decodes a multi-document YAML stream of built-in kinds.
func decodeManifests(data []byte) (*manifestSet, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	set := &manifestSet{}
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return set, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("decode rendered object: %w\n%s", err, doc)
		}
		set.docs = append(set.docs, doc)
		set.objects = append(set.objects, obj)
	}
}

// workloads are the pod templates of the objects.
func workloads(objects []runtime.Object) []workload {
	var out []workload
	for _, o := range objects {
		switch w := o.(type) {
		case *appsv1.DaemonSet:
			out = append(out, workload{"DaemonSet", w.Name, w.Namespace, &w.Spec.Template.Spec, w.Spec.Template.Labels})
		case *appsv1.Deployment:
			out = append(out, workload{"Deployment", w.Name, w.Namespace, &w.Spec.Template.Spec, w.Spec.Template.Labels})
		case *appsv1.StatefulSet:
			out = append(out, workload{"StatefulSet", w.Name, w.Namespace, &w.Spec.Template.Spec, w.Spec.Template.Labels})
		}
	}
	return out
}

// Workload returns the pod spec of the rendered workload name (a
// DaemonSet, Deployment or StatefulSet), or nil.
func (d *Deployed) Workload(name string) *corev1.PodSpec {
	for _, w := range workloads(d.Objects) {
		if w.name == name {
			return w.spec
		}
	}
	return nil
}

// HostPathsOutside lists the hostPaths of the rendered manifests that
// are outside the node's Dir and RunDir (none, or Deploy fails).
func (d *Deployed) HostPathsOutside() []string {
	var out []string
	for _, w := range workloads(d.Objects) {
		for _, v := range w.spec.Volumes {
			if v.HostPath == nil {
				continue
			}
			if p := filepath.Clean(v.HostPath.Path); !under(p, d.n.Dir) && !under(p, d.n.RunDir) {
				out = append(out, fmt.Sprintf("%s %s volume %s: %s", w.kind, w.name, v.Name, p))
			}
		}
	}
	return out
}

// under tells whether path is dir or below it.
func under(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+"/")
}

// serve adds the Services' cluster IPs to the namespace's loopback and
// serves them (services.go), and bridges the agent's REST API out.
func (d *Deployed) serve() error {
	ns := d.n.NetNSPath()
	for name, addr := range d.Services {
		ap, err := parseAddrPort(addr)
		if err != nil {
			return err
		}
		if err := addLoopbackAddr(ns, ap.Addr()); err != nil {
			return err
		}
		if name == "kubernetes" {
			p, err := startAPIServerProxy(ns, ap, d.n.Kube.Config.Host, d.n.Kube.Config.CAData, filepath.Join(d.Dir, "apiserver-proxy.log"))
			if err != nil {
				return err
			}
			d.closers = append(d.closers, p)
			if err := os.WriteFile(filepath.Join(d.Dir, "service-ca.crt"), p.CA, 0o644); err != nil {
				return err
			}
			continue
		}
		target, err := d.serviceEndpoint(name)
		if err != nil {
			return err
		}
		b, err := NewBridge(Endpoint{ns, addr}, Endpoint{ns, target})
		if err != nil {
			return err
		}
		d.closers = append(d.closers, b)
	}
	rest, err := d.agentREST()
	if err != nil {
		return err
	}
	b, err := NewBridge(Endpoint{"", "127.0.0.1:0"}, Endpoint{ns, rest})
	if err != nil {
		return err
	}
	d.closers = append(d.closers, b)
	d.AgentREST = "http://" + b.Addr()
	return nil
}

// apply applies the ServiceAccounts, writes each used one's files, then
// applies everything.
func (d *Deployed) apply(ctx context.Context, set *manifestSet) error {
	var accounts [][]byte
	for i, o := range set.objects {
		if _, ok := o.(*corev1.ServiceAccount); ok {
			accounts = append(accounts, set.docs[i])
		}
	}
	if len(accounts) > 0 {
		file := filepath.Join(d.Dir, "serviceaccounts.yaml")
		if err := os.WriteFile(file, bytes.Join(accounts, []byte("---\n")), 0o644); err != nil {
			return err
		}
		if err := d.kubectlApply(ctx, file); err != nil {
			return err
		}
	}
	for _, w := range workloads(set.objects) {
		if w.spec.ServiceAccountName != "" {
			if err := d.writeServiceAccount(ctx, w.namespace, w.spec.ServiceAccountName); err != nil {
				return err
			}
		}
	}
	return d.kubectlApply(ctx, d.Rendered)
}

// kubectlApply runs kubectl apply -f file.
func (d *Deployed) kubectlApply(ctx context.Context, file string) error {
	out, err := d.n.Kube.KubectlCmd(ctx, "apply", "-f", file).CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubectl apply -f %s: %w: %s", file, err, out)
	}
	return nil
}

// Close stops what Deploy serves (the API server proxy, the Service and
// agent bridges), in reverse order; it may be called again.
func (d *Deployed) Close() error {
	var errs []error
	for i := len(d.closers) - 1; i >= 0; i-- {
		errs = append(errs, d.closers[i].Close())
	}
	d.closers = nil
	return errors.Join(errs...)
}

// StopPodNetwork stops kubelet and removes the sandboxes of the
// pod-network pods through containerd (each a CNI DEL) while the
// deployed agent still runs: the node's Stop removes every sandbox at
// once, and the agent's own among the first would fail the DELs of the
// others (containerd keeps a deleted pod's stopped sandbox, and DELs it
// again on removal). The host-network ones (the agent, etcd) are left
// for Stop; no CNI call is made for them.
func (d *Deployed) StopPodNetwork(ctx context.Context) error {
	c := d.n.Containerd
	if err := d.n.Kubelet.Stop(); err != nil {
		return err
	}
	sandboxes, err := c.Sandboxes(ctx)
	if err != nil {
		return err
	}
	var ids []string
	for _, sb := range sandboxes {
		out, err := c.Crictl(ctx, "inspectp", "-o", "json", sb.ID)
		if err != nil {
			return err
		}
		var st struct {
			Status struct {
				Linux struct {
					Namespaces struct {
						Options struct {
							Network string `json:"network"`
						} `json:"options"`
					} `json:"namespaces"`
				} `json:"linux"`
			} `json:"status"`
		}
		if err := json.Unmarshal(out, &st); err != nil {
			return fmt.Errorf("crictl inspectp %s: %w", sb.ID, err)
		}
		if st.Status.Linux.Namespaces.Options.Network != "NODE" {
			ids = append(ids, sb.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	_, err = c.Crictl(ctx, append([]string{"rmp", "-f"}, ids...)...)
	return err
}

// NodeIPAM reads the deployed agent's GET /contiv/v1/ipam.
func (d *Deployed) NodeIPAM(ctx context.Context) (ipam.NodeIPAMInfo, error) {
	var info ipam.NodeIPAMInfo
	err := cluster.GetJSON(ctx, d.AgentREST+ipam.IPAMPath, &info)
	return info, err
}

// AllocatedIPs maps "namespace/name" to the addresses the deployed agent
// holds for the pod (GET /contiv/v1/ipam/allocations), without prefix
// lengths.
func (d *Deployed) AllocatedIPs(ctx context.Context) (map[string][]string, error) {
	var allocs ipam.Allocations
	if err := cluster.GetJSON(ctx, d.AgentREST+ipam.AllocationsPath, &allocs); err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, a := range allocs.Pods {
		ips := a.IPs
		if len(ips) == 0 {
			ips = []string{a.MainIP}
		}
		key := a.PodID.Namespace + "/" + a.PodID.Name
		for _, ip := range ips {
			out[key] = append(out[key], strings.Split(ip, "/")[0])
		}
	}
	return out, nil
}

// PodReady tells whether a pod runs, is not being deleted and is Ready
// (its containers pass their readiness probes).
func PodReady(p corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podState says why a pod is not ready: its phase and each container's
// waiting or terminated reason.
func podState(p corev1.Pod) string {
	s := fmt.Sprintf("%s %s", p.Name, p.Status.Phase)
	for _, c := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		switch {
		case c.State.Waiting != nil:
			s += fmt.Sprintf(" %s waiting (%s: %s, %d restarts)", c.Name, c.State.Waiting.Reason, c.State.Waiting.Message, c.RestartCount)
		case c.State.Terminated != nil && c.State.Terminated.ExitCode != 0:
			s += fmt.Sprintf(" %s terminated (%s, exit %d)", c.Name, c.State.Terminated.Reason, c.State.Terminated.ExitCode)
		case c.State.Running != nil && !c.Ready:
			s += fmt.Sprintf(" %s running, not ready (%d restarts)", c.Name, c.RestartCount)
		}
	}
	return s
}

// WaitPodsReady waits until count pods of namespace with the selector
// exist and all are Ready (PodReady), and returns them.
func (n *Node) WaitPodsReady(ctx context.Context, namespace, selector string, count int, timeout time.Duration) ([]corev1.Pod, error) {
	var last string
	err := poll(ctx, timeout, func() (bool, error) {
		pods, err := n.Pods(ctx, namespace, selector)
		if err != nil {
			return false, err
		}
		ready := 0
		var waiting []string
		for _, p := range pods {
			if PodReady(p) {
				ready++
			} else {
				waiting = append(waiting, podState(p))
			}
		}
		last = fmt.Sprintf("%d of %d pods ready (%d listed); not yet: %s", ready, count, len(pods), strings.Join(waiting, "; "))
		return ready == count && len(pods) == count, nil
	})
	if err != nil {
		return nil, fmt.Errorf("pods %s in %s: %w; %s", selector, namespace, err, last)
	}
	return n.Pods(ctx, namespace, selector)
}
