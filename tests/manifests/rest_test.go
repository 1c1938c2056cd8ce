package manifests

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/contiv-ipam/agent/infra/health"
	"github.com/contiv-ipam/agent/infra/rest"
)

// checkREST: for the agent and contiv-ksr, the container port "http" and
// both probes use the port of http.conf's endpoint (or the binary's
// default endpoint), the probes the health plugin's paths (the REST
// server's probe paths, served without client authentication) with no
// Authorization header and the scheme http.conf serves (HTTPS with
// server-cert-file), and the probes
// reach the listener: a loopback endpoint only in the host network and
// probed on loopback, else an endpoint the pod IP answers on.
func checkREST(_ *testing.T, b *bundle) []error {
	cs, err := components(b)
	if err != nil {
		return []error{err}
	}
	var errs []error
	for _, c := range cs {
		errs = append(errs, checkComponentREST(b, c)...)
	}
	return errs
}

func checkComponentREST(b *bundle, c component) []error {
	conf, err := loadTyped[rest.Config](b, c, "http.conf")
	if err != nil {
		return []error{err}
	}
	host, port, err := net.SplitHostPort(conf.Endpoint)
	if err != nil {
		return []error{fmt.Errorf("%s http.conf endpoint %q: %w", c.name, conf.Endpoint, err)}
	}
	var errs []error
	if p := namedPort(c.main, "http"); strconv.Itoa(p) != port {
		errs = append(errs, fmt.Errorf("%s is %d, but http.conf endpoint %q listens on port %s",
			c.at("containers[%s].ports[name=http].containerPort", c.name), p, conf.Endpoint, port))
	}
	if isLoopback(host) && !c.pod.HostNetwork {
		errs = append(errs, fmt.Errorf("%s: http.conf endpoint %q is loopback, but the pod is not in the host network: "+
			"the kubelet probes the pod IP, which nothing answers", c.at("spec.template.spec.hostNetwork"), conf.Endpoint))
	}
	errs = append(errs, checkProbe(c, "readinessProbe", c.main.ReadinessProbe, health.ReadinessPath, host, port, conf)...)
	return append(errs, checkProbe(c, "livenessProbe", c.main.LivenessProbe, health.LivenessPath, host, port, conf)...)
}

// checkProbe checks one httpGet probe against the health path, the REST
// endpoint host:port and the scheme of conf.
func checkProbe(c component, name string, p *corev1.Probe, path, host, port string, conf *rest.Config) []error {
	endpoint := conf.Endpoint
	field := c.at("containers[%s].%s.httpGet", c.name, name)
	if p == nil || p.HTTPGet == nil {
		return []error{fmt.Errorf("%s: missing; want GET %s on port %s", field, path, port)}
	}
	var errs []error
	g := p.HTTPGet
	if g.Path != path {
		errs = append(errs, fmt.Errorf("%s.path is %q, but the health plugin serves %q", field, g.Path, path))
	}
	if want := probeScheme(conf); schemeOf(g) != want {
		errs = append(errs, fmt.Errorf("%s.scheme is %s, but http.conf endpoint %q serves %s (server-cert-file %q)",
			field, schemeOf(g), endpoint, want, conf.ServerCertFile))
	}
	for _, h := range g.HTTPHeaders {
		if strings.EqualFold(h.Name, "Authorization") {
			errs = append(errs, fmt.Errorf("%s.httpHeaders sets %s: the probe paths need no credentials, "+
				"and a manifest is no place for them", field, h.Name))
		}
	}
	if got := probePort(c.main, g); strconv.Itoa(got) != port {
		errs = append(errs, fmt.Errorf("%s.port is %s, but http.conf endpoint %q listens on port %s",
			field, portDesc(g, got), endpoint, port))
	}
	if isLoopback(host) && !isLoopback(g.Host) {
		errs = append(errs, fmt.Errorf("%s.host is %q, but http.conf endpoint %q listens on loopback only: "+
			"the kubelet would probe the node IP", field, g.Host, endpoint))
	}
	return errs
}

// probeScheme is the scheme the REST server of conf speaks.
func probeScheme(conf *rest.Config) corev1.URIScheme {
	if conf.TLS() {
		return corev1.URISchemeHTTPS
	}
	return corev1.URISchemeHTTP
}

// schemeOf is a probe's scheme; the kubelet's default is HTTP.
func schemeOf(g *corev1.HTTPGetAction) corev1.URIScheme {
	if g.Scheme == "" {
		return corev1.URISchemeHTTP
	}
	return g.Scheme
}

// probePort resolves a probe's port (a number or a container port name).
func probePort(c *corev1.Container, g *corev1.HTTPGetAction) int {
	if g.Port.StrVal != "" {
		return namedPort(c, g.Port.StrVal)
	}
	return g.Port.IntValue()
}

// portDesc prints a probe's port, with the number a name resolves to.
func portDesc(g *corev1.HTTPGetAction, resolved int) string {
	if g.Port.StrVal != "" {
		return fmt.Sprintf("%q (%d)", g.Port.StrVal, resolved)
	}
	return g.Port.String()
}

// namedPort returns the container port named name, 0 if none.
func namedPort(c *corev1.Container, name string) int {
	for _, p := range c.Ports {
		if p.Name == name {
			return int(p.ContainerPort)
		}
	}
	return 0
}
