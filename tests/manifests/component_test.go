package manifests

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/rest"
	"github.com/contiv-ipam/agent/plugins/ksr"
)

// component is one of our binaries as a workload of the bundle.
type component struct {
	kind, name string // "DaemonSet", "contiv-agent"; the binary has the same name
	// defaultEndpoint is the REST endpoint of the binary without http.conf.
	defaultEndpoint string
	pod             *corev1.PodSpec
	// main is the container named like the workload: the binary itself.
	main *corev1.Container
}

// components returns the agent and contiv-ksr.
func components(b *bundle) ([]component, error) {
	ds, dep := b.agent(), b.ksr()
	if ds == nil || dep == nil {
		return nil, fmt.Errorf("the render lacks DaemonSet %s (%v) or Deployment %s (%v)", agentName, ds != nil, ksrName, dep != nil)
	}
	cs := []component{
		{kind: "DaemonSet", name: agentName, defaultEndpoint: rest.DefaultEndpoint, pod: &ds.Spec.Template.Spec},
		{kind: "Deployment", name: ksrName, defaultEndpoint: ksr.DefaultEndpoint, pod: &dep.Spec.Template.Spec},
	}
	for i := range cs {
		cs[i].main = container(cs[i].pod.Containers, cs[i].name)
		if cs[i].main == nil {
			return nil, fmt.Errorf("%s %s: no container named %s", cs[i].kind, cs[i].name, cs[i].name)
		}
	}
	return cs, nil
}

// at names a field of the component's manifest for an error message.
func (c component) at(format string, args ...any) string {
	return c.kind + " " + c.name + " " + fmt.Sprintf(format, args...)
}

func container(cs []corev1.Container, name string) *corev1.Container {
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	return nil
}

// literalEnv returns the plain value of env var name in c.
func literalEnv(c *corev1.Container, name string) (string, bool) {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom == nil {
			return e.Value, true
		}
	}
	return "", false
}

// mountAt returns c's volume mount at path.
func mountAt(c *corev1.Container, path string) *corev1.VolumeMount {
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].MountPath == path {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

func volume(pod *corev1.PodSpec, name string) *corev1.Volume {
	for i := range pod.Volumes {
		if pod.Volumes[i].Name == name {
			return &pod.Volumes[i]
		}
	}
	return nil
}

// configDirEnv is the variable (of flag -config-dir) both binaries read
// their <plugin>.conf directory from.
var configDirEnv = config.EnvName(config.DirFlag)

// configFiles returns the .conf files the component reads: the ConfigMap
// mounted at its CONFIG_DIR.
func configFiles(b *bundle, c component) (map[string]string, error) {
	dir, ok := literalEnv(c.main, configDirEnv)
	if !ok {
		return nil, fmt.Errorf("%s: no %s, so the binary reads no ConfigMap", c.at("containers[%s].env", c.name), configDirEnv)
	}
	m := mountAt(c.main, dir)
	if m == nil {
		return nil, fmt.Errorf("%s: %s=%q but no volumeMount has that mountPath", c.at("containers[%s].env", c.name), configDirEnv, dir)
	}
	v := volume(c.pod, m.Name)
	if v == nil || v.ConfigMap == nil {
		return nil, fmt.Errorf("%s: volume %q mounted at %s (%s) is not a ConfigMap", c.at("volumes"), m.Name, dir, configDirEnv)
	}
	cm := b.configMap(v.ConfigMap.Name)
	if cm == nil {
		return nil, fmt.Errorf("%s: ConfigMap %q is not in the render", c.at("volumes[%s].configMap.name", m.Name), v.ConfigMap.Name)
	}
	return cm.Data, nil
}

// isLoopback reports whether host (of host:port) is a loopback name.
func isLoopback(host string) bool {
	return host == "localhost" || strings.HasPrefix(host, "127.") || host == "::1"
}
