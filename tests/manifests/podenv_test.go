package manifests

import (
	"regexp"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// clusterIP is the cluster IP the tests give the i-th Service of the
// render (the render has none: the API server assigns them).
func clusterIP(b *bundle, name string) string {
	for i, s := range all[*corev1.Service](b) {
		if s.Name == name {
			return "10.96.100." + strconv.Itoa(i+10)
		}
	}
	return ""
}

// linkName is a Service's name as the kubelet writes it in variables.
func linkName(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "-", "_")) }

// serviceLinks are the variables the kubelet puts into every container of
// the namespace for each Service with a cluster IP (the pod's
// enableServiceLinks defaults to true): NAME_SERVICE_HOST,
// NAME_SERVICE_PORT (the first port) and NAME_SERVICE_PORT_<PORT NAME>.
func serviceLinks(b *bundle) map[string]string {
	env := map[string]string{}
	for _, s := range all[*corev1.Service](b) {
		if s.Spec.ClusterIP == corev1.ClusterIPNone || len(s.Spec.Ports) == 0 {
			continue
		}
		n := linkName(s.Name)
		env[n+"_SERVICE_HOST"] = clusterIP(b, s.Name)
		env[n+"_SERVICE_PORT"] = strconv.Itoa(int(s.Spec.Ports[0].Port))
		for _, p := range s.Spec.Ports {
			if p.Name != "" {
				env[n+"_SERVICE_PORT_"+linkName(p.Name)] = strconv.Itoa(int(p.Port))
			}
		}
	}
	return env
}

var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// containerEnv is the environment the kubelet gives c: the service links,
// then c's variables in order, each $(VAR) expanded from the variables
// before it and the links (an unknown one stays as written, as the kubelet
// leaves it). A fieldRef becomes its field path ("status.podIP").
func containerEnv(b *bundle, c *corev1.Container) map[string]string {
	return containerEnvWith(b, c, nil)
}

// containerEnvWith is containerEnv with the values of some fieldRefs
// (field path -> value).
func containerEnvWith(b *bundle, c *corev1.Container, fields map[string]string) map[string]string {
	env := serviceLinks(b)
	own := map[string]string{}
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			v = e.ValueFrom.FieldRef.FieldPath
			if x, ok := fields[v]; ok {
				v = x
			}
		}
		v = envRef.ReplaceAllStringFunc(v, func(ref string) string {
			name := envRef.FindStringSubmatch(ref)[1]
			if x, ok := own[name]; ok {
				return x
			}
			if x, ok := env[name]; ok {
				return x
			}
			return ref
		})
		own[e.Name] = v
	}
	for k, v := range own {
		env[k] = v
	}
	return env
}

// lookupIn turns an environment into the lookup the config code takes.
func lookupIn(env map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := env[name]
		return v, ok
	}
}
