package manifests

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/contiv-ipam/agent/infra/kvdb/bolt"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// Host directories of the CNI installation (the container runtime's).
const (
	hostCNIBinDir  = "/opt/cni/bin"
	hostCNIConfDir = "/etc/cni/net.d"
)

// agentComponent returns the agent of the bundle.
func agentComponent(b *bundle) (component, error) {
	cs, err := components(b)
	if err != nil {
		return component{}, err
	}
	return cs[0], nil
}

// checkHostDirs: the directory of podmanager.conf's socketPath and of
// bolt.conf's db-path are each mounted into the agent from the same
// path of the host (contiv-cni, on the host, dials the socket by that
// path; the bolt file must outlive the pod), and so is the directory of
// the container runtime's socket (criSocket), when set.
func checkHostDirs(_ *testing.T, b *bundle) []error {
	c, err := agentComponent(b)
	if err != nil {
		return []error{err}
	}
	pm, err := loadTyped[podmanager.Config](b, c, "podmanager.conf")
	if err != nil {
		return []error{err}
	}
	bc, err := loadTyped[bolt.Config](b, c, "bolt.conf")
	if err != nil {
		return []error{err}
	}
	errs := checkHostMount(c, c.main, filepath.Dir(pm.SocketPath), fmt.Sprintf("podmanager.conf socketPath %q", pm.SocketPath))
	if pm.CRISocket != "" {
		cri := strings.TrimPrefix(pm.CRISocket, "unix://")
		errs = append(errs, checkHostMount(c, c.main, filepath.Dir(cri), fmt.Sprintf("podmanager.conf criSocket %q", pm.CRISocket))...)
	}
	return append(errs, checkHostMount(c, c.main, filepath.Dir(bc.DBPath), fmt.Sprintf("bolt.conf db-path %q", bc.DBPath))...)
}

// checkHostMount: ctr mounts, at dir, a hostPath volume of the host's dir.
func checkHostMount(c component, ctr *corev1.Container, dir, why string) []error {
	if !filepath.IsAbs(dir) {
		return []error{fmt.Errorf("%s: %s is relative: in a pod it must be an absolute host path", c.at("ConfigMap"), why)}
	}
	m := mountAt(ctr, dir)
	if m == nil {
		return []error{fmt.Errorf("%s: no mountPath %q, the directory of %s (mounts: %v)",
			c.at("containers[%s].volumeMounts", ctr.Name), dir, why, mountPaths(ctr))}
	}
	v := volume(c.pod, m.Name)
	if v == nil || v.HostPath == nil || v.HostPath.Path != dir {
		got := "not a hostPath"
		if v != nil && v.HostPath != nil {
			got = fmt.Sprintf("%q", v.HostPath.Path)
		}
		return []error{fmt.Errorf("%s is %s, want %q, the directory of %s", c.at("volumes[%s].hostPath.path", m.Name), got, dir, why)}
	}
	return nil
}

func mountPaths(c *corev1.Container) []string {
	var out []string
	for _, m := range c.VolumeMounts {
		out = append(out, m.MountPath)
	}
	return out
}

// checkConflist: the init container mounts the host's CNI directories, and
// every conflist it installs calls contiv-cni with grpcServer = the
// agent's socketPath.
func checkConflist(_ *testing.T, b *bundle) []error {
	c, err := agentComponent(b)
	if err != nil {
		return []error{err}
	}
	pm, err := loadTyped[podmanager.Config](b, c, "podmanager.conf")
	if err != nil {
		return []error{err}
	}
	initC := container(c.pod.InitContainers, installName)
	if initC == nil {
		return []error{fmt.Errorf("%s: no init container %s", c.at("initContainers"), installName)}
	}
	var errs []error
	for _, dir := range []string{hostCNIBinDir, hostCNIConfDir} {
		if hostMount(c, initC, dir) == "" {
			errs = append(errs, fmt.Errorf("%s: no hostPath volume of %s is mounted", c.at("initContainers[%s].volumeMounts", installName), dir))
		}
	}
	lists := conflists(b, c, initC)
	if len(lists) == 0 {
		errs = append(errs, fmt.Errorf("%s: no ConfigMap with a .conflist is mounted", c.at("initContainers[%s].volumeMounts", installName)))
	}
	for key, data := range lists {
		if err := checkGRPCServer(key, data, pm.SocketPath); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.at("ConfigMap key %s", key), err))
		}
	}
	return errs
}

// hostMount returns where ctr mounts the host's dir ("" if it does not).
func hostMount(c component, ctr *corev1.Container, dir string) string {
	for _, m := range ctr.VolumeMounts {
		if v := volume(c.pod, m.Name); v != nil && v.HostPath != nil && v.HostPath.Path == dir {
			return m.MountPath
		}
	}
	return ""
}

// conflists returns the .conflist files of the ConfigMaps ctr mounts.
func conflists(b *bundle, c component, ctr *corev1.Container) map[string]string {
	out := map[string]string{}
	for _, m := range ctr.VolumeMounts {
		v := volume(c.pod, m.Name)
		if v == nil || v.ConfigMap == nil || b.configMap(v.ConfigMap.Name) == nil {
			continue
		}
		for k, d := range b.configMap(v.ConfigMap.Name).Data {
			if strings.HasSuffix(k, ".conflist") {
				out[k] = d
			}
		}
	}
	return out
}

// cniPlugin holds the keys of a conflist entry the check reads.
type cniPlugin struct {
	Type       string     `json:"type"`
	GRPCServer string     `json:"grpcServer"`
	IPAM       *cniPlugin `json:"ipam"`
}

// checkGRPCServer: the conflist runs contiv-cni (as a plugin or as the
// IPAM of one) and its grpcServer names socket.
func checkGRPCServer(key, data, socket string) error {
	var list struct {
		Plugins []cniPlugin `json:"plugins"`
	}
	if err := json.Unmarshal([]byte(data), &list); err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	for _, p := range list.Plugins {
		for _, q := range []*cniPlugin{&p, p.IPAM} {
			if q == nil || q.Type != "contiv-cni" {
				continue
			}
			server := strings.TrimPrefix(strings.TrimPrefix(q.GRPCServer, "unix://"), "unix:")
			if server != socket {
				return fmt.Errorf("plugins[type=%s] grpcServer is %q, but podmanager.conf socketPath is %q", p.Type, q.GRPCServer, socket)
			}
			return nil
		}
	}
	return fmt.Errorf("no plugin (or ipam) of type contiv-cni")
}
