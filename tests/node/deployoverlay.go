//go:build node

package node

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// serviceAccountTTL is how long the service account tokens Deploy writes
// are valid (the API server's minimum is 10 minutes).
const serviceAccountTTL = 3600

// writeOverlay plans the patches from the base's rendering and writes
// overlay/: kustomization.yaml, the conflist and one patch per object.
func (d *Deployed) writeOverlay(ctx context.Context, base string) error {
	overlay := filepath.Join(d.Dir, "overlay")
	if err := os.MkdirAll(overlay, 0o755); err != nil {
		return err
	}
	if err := d.planServices(ctx); err != nil {
		return err
	}
	d.planHostPaths()
	etcd, err := d.shippedEtcdImage()
	if err != nil {
		return err
	}
	gen, err := d.writeConflist(base, overlay)
	if err != nil {
		return err
	}
	patches, err := d.writePatches(overlay)
	if err != nil {
		return err
	}
	k := map[string]any{
		"apiVersion":         "kustomize.config.k8s.io/v1beta1",
		"kind":               "Kustomization",
		"resources":          []string{"../base"},
		"images":             []map[string]string{{"name": etcd, "newName": EtcdImageRepo, "newTag": EtcdVersion()}},
		"configMapGenerator": []any{gen},
		"patches":            patches,
	}
	data, err := yaml.Marshal(k)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), data, 0o644)
}

// services are the Services of the base that get a cluster IP.
func (d *Deployed) services() []*corev1.Service {
	var out []*corev1.Service
	for _, o := range d.base.objects {
		if s, ok := o.(*corev1.Service); ok && s.Spec.ClusterIP != corev1.ClusterIPNone {
			out = append(out, s)
		}
	}
	return out
}

// planServices picks the addresses the test serves: the kubernetes
// Service's, and for each Service of the base a cluster IP from the
// tenth address of the range on (kubeadm's cluster DNS address), with
// its one port.
func (d *Deployed) planServices(ctx context.Context) error {
	kube, err := d.n.Kube.Client.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		return err
	}
	ip, err := netip.ParseAddr(kube.Spec.ClusterIP)
	if err != nil || len(kube.Spec.Ports) != 1 {
		return fmt.Errorf("the kubernetes Service: cluster IP %q, %d ports", kube.Spec.ClusterIP, len(kube.Spec.Ports))
	}
	d.Services["kubernetes"] = netip.AddrPortFrom(ip, uint16(kube.Spec.Ports[0].Port)).String()
	for range 9 {
		ip = ip.Next()
	}
	for _, s := range d.services() {
		if len(s.Spec.Ports) != 1 {
			return fmt.Errorf("k8s/ Service %s has %d ports; the test serves one", s.Name, len(s.Spec.Ports))
		}
		if _, taken := d.Services[s.Name]; taken {
			return fmt.Errorf("two Services named %s", s.Name)
		}
		d.Services[s.Name] = netip.AddrPortFrom(ip, uint16(s.Spec.Ports[0].Port)).String()
		ip = ip.Next()
	}
	return nil
}

// serviceEndpoint is where the Service name's pods listen in the node's
// namespace: its pods must be host-network pods (127.0.0.1, the node's
// address), its target port a port of theirs.
func (d *Deployed) serviceEndpoint(name string) (string, error) {
	var svc *corev1.Service
	for _, s := range d.services() {
		if s.Name == name {
			svc = s
		}
	}
	if svc == nil || len(svc.Spec.Selector) == 0 {
		return "", fmt.Errorf("k8s/ Service %s: no selector", name)
	}
	for _, w := range workloads(d.base.objects) {
		if !matches(svc.Spec.Selector, w.labels) {
			continue
		}
		if !w.spec.HostNetwork {
			return "", fmt.Errorf("k8s/ Service %s selects %s %s, a pod-network workload: the test serves host-network endpoints only",
				name, w.kind, w.name)
		}
		port, err := containerPort(w.spec, svc.Spec.Ports[0].TargetPort)
		if err != nil {
			return "", fmt.Errorf("k8s/ Service %s: %w", name, err)
		}
		return "127.0.0.1:" + strconv.Itoa(port), nil
	}
	return "", fmt.Errorf("k8s/ Service %s selects no workload", name)
}

// matches tells whether labels hold every pair of selector.
func matches(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// containerPort resolves a port (a number, or a container port's name)
// in spec.
func containerPort(spec *corev1.PodSpec, port intstr.IntOrString) (int, error) {
	if port.Type == intstr.Int {
		return port.IntValue(), nil
	}
	for _, c := range spec.Containers {
		for _, p := range c.Ports {
			if p.Name == port.StrVal {
				return int(p.ContainerPort), nil
			}
		}
	}
	return 0, fmt.Errorf("no container port named %q", port.StrVal)
}

// agentREST is where kubelet probes the agent's readiness (its REST API)
// in the node's namespace.
func (d *Deployed) agentREST() (string, error) {
	spec := d.Workload("contiv-agent")
	if spec == nil || len(spec.Containers) == 0 {
		return "", fmt.Errorf("no DaemonSet contiv-agent")
	}
	probe := spec.Containers[0].ReadinessProbe
	if probe == nil || probe.HTTPGet == nil {
		return "", fmt.Errorf("DaemonSet contiv-agent: no readiness probe")
	}
	port, err := containerPort(spec, probe.HTTPGet.Port)
	if err != nil {
		return "", err
	}
	host := probe.HTTPGet.Host
	if host == "" {
		host = "127.0.0.1" // the node's address, the host-network pod's
	}
	return host + ":" + strconv.Itoa(port), nil
}

// planHostPaths maps every hostPath of the base to the node: the CNI
// directories to containerd's, the runtime's socket directory to the
// node's containerd's, everything else under Dir/host.
func (d *Deployed) planHostPaths() {
	n := d.n
	for _, w := range workloads(d.base.objects) {
		for _, v := range w.spec.Volumes {
			if v.HostPath == nil {
				continue
			}
			p := filepath.Clean(v.HostPath.Path)
			switch p {
			case "/opt/cni/bin":
				d.HostPaths[p] = n.CNIBinDir
			case "/etc/cni/net.d":
				d.HostPaths[p] = n.CNIConfDir
			case "/run/containerd", "/var/run/containerd":
				d.HostPaths[p] = filepath.Dir(n.Containerd.Socket)
			default:
				d.HostPaths[p] = filepath.Join(d.Dir, "host", p)
			}
		}
	}
}

// nodePath is where the host path p (under a hostPath of the base) is on
// the node.
func (d *Deployed) nodePath(p string) (string, error) {
	p = filepath.Clean(p)
	best := ""
	for k := range d.HostPaths {
		if under(p, k) && len(k) > len(best) {
			best = k
		}
	}
	if best == "" {
		return "", fmt.Errorf("%s is under no hostPath of k8s/", p)
	}
	return d.HostPaths[best] + strings.TrimPrefix(p, best), nil
}

// shippedEtcdImage is the repository of the etcd image k8s/ deploys; its
// tag must be envtest's etcd version.
func (d *Deployed) shippedEtcdImage() (string, error) {
	for _, w := range workloads(d.base.objects) {
		for _, c := range w.spec.Containers {
			i := strings.LastIndex(c.Image, ":")
			if i < strings.LastIndex(c.Image, "/") || !strings.HasSuffix(c.Image[:i], "/etcd") {
				continue
			}
			repo, tag := c.Image[:i], c.Image[i+1:]
			if tag != EtcdVersion() {
				return "", fmt.Errorf("k8s/ deploys %s; the etcd server of the tests is %s", c.Image, EtcdVersion())
			}
			return repo, nil
		}
	}
	return "", fmt.Errorf("k8s/ deploys no etcd image")
}

// kustomizationGenerators reads the configMapGenerator and namespace of
// the base's kustomization.yaml.
type baseKustomization struct {
	Namespace          string `json:"namespace"`
	ConfigMapGenerator []struct {
		Name  string   `json:"name"`
		Files []string `json:"files"`
	} `json:"configMapGenerator"`
}

// writeConflist writes the base's conflist with the node's network name
// and grpcServer into overlay and returns the configMapGenerator entry
// that merges it.
func (d *Deployed) writeConflist(base, overlay string) (map[string]any, error) {
	data, err := os.ReadFile(filepath.Join(base, "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	var k baseKustomization
	if err := yaml.Unmarshal(data, &k); err != nil {
		return nil, fmt.Errorf("k8s/kustomization.yaml: %w", err)
	}
	for _, g := range k.ConfigMapGenerator {
		i := slices.IndexFunc(g.Files, func(f string) bool { return strings.HasSuffix(f, ".conflist") })
		if i < 0 {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(base, g.Files[i]))
		if err != nil {
			return nil, err
		}
		var conf map[string]any
		if err := json.Unmarshal(raw, &conf); err != nil {
			return nil, fmt.Errorf("%s: %w", g.Files[i], err)
		}
		conf["name"] = d.Network
		plugins, _ := conf["plugins"].([]any)
		for _, p := range plugins {
			ipamConf, _ := p.(map[string]any)["ipam"].(map[string]any)
			if gs, ok := ipamConf["grpcServer"].(string); ok {
				if d.CNISocket, err = d.nodePath(gs); err != nil {
					return nil, fmt.Errorf("%s grpcServer: %w", g.Files[i], err)
				}
				ipamConf["grpcServer"] = d.CNISocket
			}
		}
		if d.CNISocket == "" {
			return nil, fmt.Errorf("%s: no grpcServer", g.Files[i])
		}
		out, err := json.MarshalIndent(conf, "", "  ")
		if err != nil {
			return nil, err
		}
		name := filepath.Base(g.Files[i])
		if err := os.WriteFile(filepath.Join(overlay, name), out, 0o644); err != nil {
			return nil, err
		}
		return map[string]any{"name": g.Name, "namespace": k.Namespace, "behavior": "merge", "files": []string{name}}, nil
	}
	return nil, fmt.Errorf("k8s/kustomization.yaml generates no conflist")
}

// writePatches writes a strategic merge patch per object that needs one
// and returns the kustomization's patches entries.
func (d *Deployed) writePatches(overlay string) ([]map[string]string, error) {
	var entries []map[string]string
	write := func(kind, name, namespace string, spec map[string]any) error {
		patch := map[string]any{"apiVersion": apiVersion(kind), "kind": kind,
			"metadata": map[string]string{"name": name, "namespace": namespace}, "spec": spec}
		data, err := json.MarshalIndent(patch, "", "  ")
		if err != nil {
			return err
		}
		file := "patch-" + strings.ToLower(kind) + "-" + name + ".json"
		entries = append(entries, map[string]string{"path": file})
		return os.WriteFile(filepath.Join(overlay, file), data, 0o644)
	}
	for _, s := range d.services() {
		ap, err := parseAddrPort(d.Services[s.Name])
		if err != nil {
			return nil, err
		}
		if err := write("Service", s.Name, s.Namespace, map[string]any{"clusterIP": ap.Addr().String()}); err != nil {
			return nil, err
		}
	}
	for _, w := range workloads(d.base.objects) {
		spec := d.podPatch(w)
		if len(spec) == 0 {
			continue
		}
		if err := write(w.kind, w.name, w.namespace, map[string]any{"template": map[string]any{"spec": spec}}); err != nil {
			return nil, err
		}
	}
	return entries, nil
}

// podPatch is the patch of a pod template: its hostPaths moved, and for
// a pod-network pod the Services' DNS names as hostAliases, for a pod
// with a service account its files.
func (d *Deployed) podPatch(w workload) map[string]any {
	spec := map[string]any{}
	var volumes []any
	for _, v := range w.spec.Volumes {
		if v.HostPath != nil {
			volumes = append(volumes, map[string]any{"name": v.Name,
				"hostPath": map[string]any{"path": d.HostPaths[filepath.Clean(v.HostPath.Path)]}})
		}
	}
	if !w.spec.HostNetwork {
		var aliases []any
		for _, s := range d.services() {
			ap, _ := parseAddrPort(d.Services[s.Name])
			aliases = append(aliases, map[string]any{"ip": ap.Addr().String(), "hostnames": []string{
				s.Name, s.Name + "." + s.Namespace, s.Name + "." + s.Namespace + ".svc", s.Name + "." + s.Namespace + ".svc.cluster.local"}})
		}
		if len(aliases) > 0 {
			spec["hostAliases"] = aliases
		}
	}
	if w.spec.ServiceAccountName != "" {
		volumes = append(volumes, map[string]any{"name": serviceAccountVolume,
			"hostPath": map[string]any{"path": d.serviceAccountDir(w.namespace, w.spec.ServiceAccountName), "type": "Directory"}})
		mount := []any{map[string]any{"name": serviceAccountVolume, "mountPath": serviceAccountDir, "readOnly": true}}
		for field, list := range map[string][]corev1.Container{"containers": w.spec.Containers, "initContainers": w.spec.InitContainers} {
			var cs []any
			for _, c := range list {
				cs = append(cs, map[string]any{"name": c.Name, "volumeMounts": mount})
			}
			if len(cs) > 0 {
				spec[field] = cs
			}
		}
	}
	if len(volumes) > 0 {
		spec["volumes"] = volumes
	}
	return spec
}

// apiVersion is the API version of the kinds Deploy patches.
func apiVersion(kind string) string {
	if kind == "Service" {
		return "v1"
	}
	return "apps/v1"
}

// serviceAccountDir is the host directory of a service account's files.
func (d *Deployed) serviceAccountDir(namespace, name string) string {
	return filepath.Join(d.Dir, "serviceaccounts", namespace+"_"+name)
}

// writeServiceAccount writes a token of the service account (a
// TokenRequest), the CA of the API server proxy and the namespace into
// its directory, readable by a pod's non-root user.
func (d *Deployed) writeServiceAccount(ctx context.Context, namespace, name string) error {
	ttl := int64(serviceAccountTTL)
	tr, err := d.n.Kube.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &ttl}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("token of service account %s/%s: %w", namespace, name, err)
	}
	ca, err := os.ReadFile(filepath.Join(d.Dir, "service-ca.crt"))
	if err != nil {
		return err
	}
	dir := d.serviceAccountDir(namespace, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for file, data := range map[string][]byte{"token": []byte(tr.Status.Token), "ca.crt": ca, "namespace": []byte(namespace)} {
		if err := os.WriteFile(filepath.Join(dir, file), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// parseAddrPort parses "ip:port".
func parseAddrPort(s string) (netip.AddrPort, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return ap, fmt.Errorf("address %q: %w", s, err)
	}
	return ap, nil
}
