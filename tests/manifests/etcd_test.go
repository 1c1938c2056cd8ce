package manifests

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/contiv-ipam/agent/infra/kvdb/etcd"
	"github.com/contiv-ipam/agent/tests/kubeenv"
)

// checkEtcd: the contiv-etcd Service, the StatefulSet and every
// component's etcd.conf (with its environment, ETCD_ENDPOINTS) agree on
// the client port, and each component reaches etcd in a way that works
// where it runs.
func checkEtcd(_ *testing.T, b *bundle) []error {
	port, target, errs := etcdServicePort(b)
	if port == 0 {
		return errs
	}
	errs = append(errs, checkEtcdServer(b, target)...)
	cs, err := components(b)
	if err != nil {
		return append(errs, err)
	}
	for _, c := range cs {
		errs = append(errs, checkEtcdEndpoints(b, c, port)...)
	}
	return errs
}

// etcdServicePort returns the Service's client port and the etcd
// container port it targets.
func etcdServicePort(b *bundle) (port, target int, errs []error) {
	svc, sts := b.etcdService(), b.etcd()
	if svc == nil || sts == nil || len(sts.Spec.Template.Spec.Containers) == 0 {
		return 0, 0, []error{fmt.Errorf("the render lacks Service %s or StatefulSet %s", etcdName, etcdName)}
	}
	for _, p := range svc.Spec.Ports {
		if p.Name != etcdPortName {
			continue
		}
		ctr := &sts.Spec.Template.Spec.Containers[0]
		target = p.TargetPort.IntValue()
		if p.TargetPort.StrVal != "" {
			target = namedPort(ctr, p.TargetPort.StrVal)
		}
		if target == 0 || !hasPort(ctr, target) {
			errs = append(errs, fmt.Errorf("Service %s spec.ports[%s].targetPort %s is no port of StatefulSet %s",
				etcdName, etcdPortName, p.TargetPort.String(), etcdName))
		}
		return int(p.Port), target, errs
	}
	return 0, 0, []error{fmt.Errorf("Service %s has no port named %q", etcdName, etcdPortName)}
}

func hasPort(c *corev1.Container, port int) bool {
	for _, p := range c.Ports {
		if int(p.ContainerPort) == port {
			return true
		}
	}
	return false
}

// checkEtcdServer: etcd serves clients on the target port, has one
// initial member per replica, runs in the host network (the agents, which
// are the CNI, need it before any pod has an address) and is the etcd
// release the tests run (tests/kubebin).
func checkEtcdServer(b *bundle, target int) []error {
	sts := b.etcd()
	ctr := &sts.Spec.Template.Spec.Containers[0]
	env := containerEnv(b, ctr)
	var errs []error
	for _, name := range []string{"ETCD_LISTEN_CLIENT_URLS", "ETCD_ADVERTISE_CLIENT_URLS"} {
		for _, u := range strings.Split(env[name], ",") {
			if p := urlPort(u); p != target {
				errs = append(errs, fmt.Errorf("StatefulSet %s env %s has %q (port %d), but Service %s targets port %d",
					etcdName, name, u, p, etcdName, target))
			}
		}
	}
	members := len(strings.Split(env["ETCD_INITIAL_CLUSTER"], ","))
	if replicas := int(*sts.Spec.Replicas); members != replicas {
		errs = append(errs, fmt.Errorf("StatefulSet %s spec.replicas is %d, but env ETCD_INITIAL_CLUSTER %q lists %d member(s)",
			etcdName, replicas, env["ETCD_INITIAL_CLUSTER"], members))
	}
	if !sts.Spec.Template.Spec.HostNetwork {
		errs = append(errs, fmt.Errorf("StatefulSet %s spec.template.spec.hostNetwork is false: its pod would wait for "+
			"a pod address from the agents, which wait for etcd", etcdName))
	}
	_, version, _ := strings.Cut(kubeenv.Version, "-etcd")
	if _, tag, _ := strings.Cut(ctr.Image, ":"); tag != "v"+version {
		errs = append(errs, fmt.Errorf("StatefulSet %s containers[%s].image is %q, want tag v%s (the etcd the tests run, tests/kubebin)",
			etcdName, ctr.Name, ctr.Image, version))
	}
	return errs
}

func urlPort(u string) int {
	x, err := url.Parse(u)
	if err != nil {
		return 0
	}
	p, _ := strconv.Atoi(x.Port())
	return p
}

// checkEtcdEndpoints: the component's etcd is the contiv-etcd Service's
// port, by cluster IP (through the service-link variables) or, outside
// the host network only, by DNS name; never the embedded server.
func checkEtcdEndpoints(b *bundle, c component, port int) []error {
	conf, err := loadTyped[etcd.Config](b, c, "etcd.conf")
	if err != nil {
		return []error{err}
	}
	env := containerEnv(b, c.main)
	field := fmt.Sprintf("%s etcd.conf endpoints / env %s %q", c.name, etcd.EnvEndpoints, env[etcd.EnvEndpoints])
	if conf.Embedded {
		return []error{fmt.Errorf("%s: name no etcd, so %s would run a private embedded etcd", field, c.name)}
	}
	var errs []error
	for _, ep := range conf.Endpoints {
		if err := checkEtcdEndpoint(b, c, ep, port); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", field, err))
		}
	}
	return errs
}

func checkEtcdEndpoint(b *bundle, c component, ep string, port int) error {
	if u, err := url.Parse(ep); err == nil && u.Host != "" {
		ep = u.Host
	}
	host, p, err := net.SplitHostPort(ep)
	if err != nil {
		return err
	}
	if p != strconv.Itoa(port) {
		return fmt.Errorf("endpoint %q has port %s, but Service %s serves port %d", ep, p, etcdName, port)
	}
	if host == clusterIP(b, etcdName) {
		return nil
	}
	if !serviceDNSName(host) {
		return fmt.Errorf("endpoint %q is not Service %s (its cluster IP or DNS name)", ep, etcdName)
	}
	if c.pod.HostNetwork {
		return fmt.Errorf("endpoint %q is a DNS name, but %s is in the host network: the cluster DNS has no "+
			"pod address until the agents serve CNI; use the service-link variables", ep, c.name)
	}
	return nil
}

func serviceDNSName(host string) bool {
	for _, n := range []string{etcdName, etcdName + "." + namespace, etcdName + "." + namespace + ".svc",
		etcdName + "." + namespace + ".svc.cluster.local"} {
		if host == n {
			return true
		}
	}
	return false
}
