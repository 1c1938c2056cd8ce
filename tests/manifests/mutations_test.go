package manifests

import (
	"errors"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// mutation breaks one value of the rendered manifests; check must then
// report an error containing want (the field and the values).
type mutation struct {
	name   string
	check  string
	mutate func(b *bundle)
	want   []string
}

// Each check fails on a manifest broken the way it guards against.
func TestEachCheckCatches(t *testing.T) {
	covered := map[string]bool{}
	for _, m := range mutations {
		covered[m.check] = true
		t.Run(m.name, func(t *testing.T) {
			g := NewWithT(t)
			b := render(t)
			m.mutate(b)
			g.Expect(b.fixtureErr).NotTo(HaveOccurred(), "the mutation changes nothing")
			err := errors.Join(checks[m.check](t, b)...)
			g.Expect(err).To(HaveOccurred(), "check %q passed a manifest with %s", m.check, m.name)
			for _, w := range m.want {
				g.Expect(err.Error()).To(ContainSubstring(w))
			}
		})
	}
	for name := range checks {
		if !covered[name] {
			t.Errorf("check %q has no mutation that it must catch", name)
		}
	}
}

var mutations = []mutation{
	{"agent image", "images", func(b *bundle) { agentMain(b).Image = "contiv-agent:old" },
		[]string{"DaemonSet contiv-agent containers[contiv-agent].image is \"contiv-agent:old\"", "the Makefile builds"}},
	{"init image", "images", func(b *bundle) { agentInit(b).Image = "busybox" },
		[]string{"initContainers[install-cni].image is \"busybox\""}},
	{"ksr image", "images", func(b *bundle) { ksrMain(b).Image = "ghcr.io/contiv-ipam/contiv-ksr:v0" },
		[]string{"Deployment contiv-ksr containers[contiv-ksr].image"}},

	{"agent container port", "rest", func(b *bundle) { agentMain(b).Ports[0].ContainerPort = 9998 },
		[]string{"ports[name=http].containerPort is 9998", `"127.0.0.1:9999" listens on port 9999`}},
	{"agent readiness path", "rest", func(b *bundle) { agentMain(b).ReadinessProbe.HTTPGet.Path = "/ready" },
		[]string{"readinessProbe.httpGet.path is \"/ready\"", `serves "/readiness"`}},
	{"agent liveness port", "rest", func(b *bundle) { agentMain(b).LivenessProbe.HTTPGet.Port = intstr.FromInt32(9191) },
		[]string{"livenessProbe.httpGet.port is 9191", "listens on port 9999"}},
	{"agent probe on the node IP", "rest", func(b *bundle) { agentMain(b).ReadinessProbe.HTTPGet.Host = "" },
		[]string{"readinessProbe.httpGet.host is \"\"", "loopback only"}},
	{"agent REST on another port", "rest", func(b *bundle) { setConf(b, "contiv-agent-config", "http.conf", "endpoint: 127.0.0.1:9000\n") },
		[]string{"containerPort is 9999", `"127.0.0.1:9000" listens on port 9000`}},
	{"ksr REST on loopback", "rest", func(b *bundle) { setConf(b, "contiv-ksr-config", "http.conf", "endpoint: 127.0.0.1:9191\n") },
		[]string{"Deployment contiv-ksr spec.template.spec.hostNetwork", "is loopback"}},
	{"ksr without http.conf", "rest", func(b *bundle) { setConf(b, "contiv-ksr-config", "http.conf", "") },
		[]string{`"127.0.0.1:9191" is loopback`}},
	{"ksr liveness path", "rest", func(b *bundle) { ksrMain(b).LivenessProbe.HTTPGet.Path = "/healthz" },
		[]string{"Deployment contiv-ksr containers[contiv-ksr].livenessProbe.httpGet.path is \"/healthz\""}},
	{"agent probe over HTTPS, REST over HTTP", "rest", func(b *bundle) { agentMain(b).LivenessProbe.HTTPGet.Scheme = corev1.URISchemeHTTPS },
		[]string{"livenessProbe.httpGet.scheme is HTTPS", `endpoint "127.0.0.1:9999" serves HTTP`}},
	{"agent REST over HTTPS, probes over HTTP", "rest", func(b *bundle) {
		setConf(b, "contiv-agent-config", "http.conf",
			"endpoint: 127.0.0.1:9999\nserver-cert-file: /etc/contiv/tls/tls.crt\nserver-key-file: /etc/contiv/tls/tls.key\n")
	}, []string{"readinessProbe.httpGet.scheme is HTTP", "livenessProbe.httpGet.scheme is HTTP", `serves HTTPS (server-cert-file "/etc/contiv/tls/tls.crt")`}},
	{"ksr probe with credentials", "rest", func(b *bundle) {
		ksrMain(b).ReadinessProbe.HTTPGet.HTTPHeaders = []corev1.HTTPHeader{{Name: "Authorization", Value: "Basic YWRtaW46czNjcmV0"}}
	}, []string{"Deployment contiv-ksr containers[contiv-ksr].readinessProbe.httpGet.httpHeaders sets Authorization"}},
	{"ksr readiness port", "rest", func(b *bundle) { ksrMain(b).ReadinessProbe.HTTPGet.Port = intstr.FromInt32(9999) },
		[]string{"readinessProbe.httpGet.port is 9999", `":9191" listens on port 9191`}},

	{"socket hostPath", "host dirs", func(b *bundle) { hostPathOf(b, "/var/run/contiv").Path = "/run/contiv" },
		[]string{"volumes[cni-socket-dir].hostPath.path is \"/run/contiv\"", `want "/var/run/contiv"`, "socketPath"}},
	{"socket moved", "host dirs", func(b *bundle) {
		setConf(b, "contiv-agent-config", "podmanager.conf", "socketPath: /run/contiv-agent/cni.sock\n")
	}, []string{`no mountPath "/run/contiv-agent"`, `socketPath "/run/contiv-agent/cni.sock"`}},
	{"runtime socket moved", "host dirs", func(b *bundle) {
		setConf(b, "contiv-agent-config", "podmanager.conf", "criSocket: unix:///var/run/crio/crio.sock\n")
	}, []string{`no mountPath "/var/run/crio"`, `criSocket "unix:///var/run/crio/crio.sock"`}},
	{"runtime socket's host dir", "host dirs", func(b *bundle) { hostPathOf(b, "/run/containerd").Path = "/var/run/containerd" },
		[]string{"volumes[cri-socket-dir].hostPath.path is \"/var/run/containerd\"", "criSocket"}},
	{"bolt file moved", "host dirs", func(b *bundle) {
		setConf(b, "contiv-agent-config", "bolt.conf", "db-path: /var/lib/contiv-agent/bolt.db\n")
	}, []string{`no mountPath "/var/lib/contiv-agent"`, `db-path "/var/lib/contiv-agent/bolt.db"`}},
	{"bolt file relative", "host dirs", func(b *bundle) { setConf(b, "contiv-agent-config", "bolt.conf", "db-path: data/bolt.db\n") },
		[]string{"relative"}},

	{"conflist grpcServer", "conflist", func(b *bundle) {
		replaceConf(b, "contiv-cni-config", "10-contiv.conflist", "/var/run/contiv/cni.sock", "/run/cni.sock")
	}, []string{`grpcServer is "/run/cni.sock"`, `socketPath is "/var/run/contiv/cni.sock"`}},
	{"conflist without contiv-cni", "conflist", func(b *bundle) {
		replaceConf(b, "contiv-cni-config", "10-contiv.conflist", `"contiv-cni"`, `"host-local"`)
	}, []string{"no plugin (or ipam) of type contiv-cni"}},
	{"socket moved, conflist not", "conflist", func(b *bundle) {
		setConf(b, "contiv-agent-config", "podmanager.conf", "socketPath: /var/run/contiv/agent.sock\n")
	}, []string{`socketPath is "/var/run/contiv/agent.sock"`}},
	{"init without /etc/cni/net.d", "conflist", func(b *bundle) { hostPathOf(b, hostCNIConfDir).Path = "/etc/cni/conf.d" },
		[]string{"no hostPath volume of /etc/cni/net.d"}},

	{"install script skips the conflist", "install", func(b *bundle) {
		a := agentInit(b)
		a.Args[0] = strings.Replace(a.Args[0], `mv -f "$CNI_CONF_DIR/.$name.tmp"`, `true "$CNI_CONF_DIR/.$name.tmp"`, 1)
	}, []string{"10-contiv.conflist is not the ConfigMap's", "temporary files left"}},
	{"install copies the agent", "install", func(b *bundle) { setEnv(agentInit(b), "CNI_BINARY", "/usr/local/bin/contiv-agent") },
		[]string{"want the image's contiv-cni", `"image file contiv-agent"`}},
	{"install from a path the image lacks", "install", func(b *bundle) { setEnv(agentInit(b), "CNI_BINARY", "/opt/contiv-cni") },
		[]string{`env CNI_BINARY: "/opt/contiv-cni" is neither under a volumeMount nor a file contiv-agent.Dockerfile copies`}},
	{"install into another host dir", "install", func(b *bundle) { hostPathOf(b, hostCNIBinDir).Path = "/usr/libexec/cni" },
		[]string{"mounts no hostPath /opt/cni/bin"}},

	{"etcd Service port", "etcd", func(b *bundle) { b.etcdService().Spec.Ports[0].Port = 2379 },
		[]string{`endpoint "contiv-etcd.kube-system.svc:12379" has port 12379, but Service contiv-etcd serves port 2379`}},
	{"etcd targetPort", "etcd", func(b *bundle) { b.etcdService().Spec.Ports[0].TargetPort = intstr.FromString("peer") },
		[]string{"ETCD_LISTEN_CLIENT_URLS", "but Service contiv-etcd targets port 12380"}},
	{"etcd replicas", "etcd", func(b *bundle) { three := int32(3); b.etcd().Spec.Replicas = &three },
		[]string{"spec.replicas is 3", "lists 1 member(s)"}},
	{"etcd in the pod network", "etcd", func(b *bundle) { b.etcd().Spec.Template.Spec.HostNetwork = false },
		[]string{"hostNetwork is false"}},
	{"etcd image", "etcd", func(b *bundle) { b.etcd().Spec.Template.Spec.Containers[0].Image = "quay.io/coreos/etcd:latest" },
		[]string{`image is "quay.io/coreos/etcd:latest", want tag v3.6`}},
	{"ksr etcd elsewhere", "etcd", func(b *bundle) {
		setConf(b, "contiv-ksr-config", "etcd.conf", `endpoints: ["etcd.example:12379"]`)
	}, []string{`contiv-ksr etcd.conf endpoints`, `endpoint "etcd.example:12379" is not Service contiv-etcd`}},
	{"ksr embedded etcd", "etcd", func(b *bundle) { setConf(b, "contiv-ksr-config", "etcd.conf", "endpoints: []\n") },
		[]string{"contiv-ksr etcd.conf endpoints", "private embedded etcd"}},
	{"agent etcd by DNS", "etcd", func(b *bundle) {
		setConf(b, "contiv-agent-config", "etcd.conf", `endpoints: ["contiv-etcd.kube-system.svc:12379"]`)
	}, []string{"is a DNS name, but contiv-agent is in the host network"}},
	{"agent without ETCD_ENDPOINTS", "etcd", func(b *bundle) { delEnv(agentMain(b), "ETCD_ENDPOINTS") },
		[]string{`contiv-agent etcd.conf endpoints / env ETCD_ENDPOINTS ""`, "private embedded etcd"}},
	{"agent ETCD_ENDPOINTS of another Service", "etcd", func(b *bundle) {
		setEnv(agentMain(b), "ETCD_ENDPOINTS", "$(CONTIV_ETCD_PEER_SERVICE_HOST):$(CONTIV_ETCD_SERVICE_PORT_CLIENT)")
	}, []string{"$(CONTIV_ETCD_PEER_SERVICE_HOST):12379"}},

	{"unknown key", "config files", func(b *bundle) {
		replaceConf(b, "contiv-agent-config", "contiv.conf", "podSubnetCIDR:", "podSubnetCIDRs:")
	}, []string{"contiv-agent ConfigMap key contiv.conf", `unknown key "ipamConfig.podSubnetCIDRs"`}},
	{"bad value", "config files", func(b *bundle) { setConf(b, "contiv-ksr-config", "ksr.conf", "electionTTL: 10ms\n") },
		[]string{"contiv-ksr ConfigMap key ksr.conf", "electionTTL 10ms"}},
	{"overlapping subnets", "config files", func(b *bundle) {
		replaceConf(b, "contiv-agent-config", "contiv.conf", "serviceCIDR: 10.96.0.0/12", "serviceCIDR: 10.1.0.0/12")
	}, []string{"contiv.conf", "overlaps"}},
	{"a file ksr does not read", "config files", func(b *bundle) { setConf(b, "contiv-ksr-config", "bolt.conf", "") },
		[]string{`key "bolt.conf" is no file contiv-ksr reads`}},
	{"CONFIG_DIR elsewhere", "config files", func(b *bundle) { setEnv(ksrMain(b), "CONFIG_DIR", "/etc/contiv") },
		[]string{`CONFIG_DIR="/etc/contiv" but no volumeMount has that mountPath`}},

	{"misspelt variable", "env names", func(b *bundle) { agentMain(b).Env[0].Name = "CONFIG_DIRECTORY" },
		[]string{"DaemonSet contiv-agent containers[contiv-agent].env sets CONFIG_DIRECTORY"}},
	{"ksr has no node label", "env names", func(b *bundle) { setEnv(ksrMain(b), "MICROSERVICE_LABEL", "x") },
		[]string{"Deployment contiv-ksr containers[contiv-ksr].env sets MICROSERVICE_LABEL, which contiv-ksr does not read"}},

	{"no watch on pods", "access", func(b *bundle) { b.role().Rules[0].Verbs = []string{"get", "list"} },
		[]string{"do not allow watch on nodes", "watch on pods", "watch on namespaces"}},
	{"no node patch", "access", func(b *bundle) { b.role().Rules = b.role().Rules[:1] },
		[]string{"do not allow patch on nodes (core group), which node IPAM needs", "patch on nodes/status", "create on events"}},
	{"another service account", "access", func(b *bundle) { b.ksr().Spec.Template.Spec.ServiceAccountName = "default" },
		[]string{"ServiceAccount kube-system/default"}},
	{"agent tolerates nothing", "access", func(b *bundle) { b.agent().Spec.Template.Spec.Tolerations = nil },
		[]string{"DaemonSet contiv-agent spec.template.spec.tolerations"}},
}

func agentMain(b *bundle) *corev1.Container {
	return container(b.agent().Spec.Template.Spec.Containers, agentName)
}

func agentInit(b *bundle) *corev1.Container {
	return container(b.agent().Spec.Template.Spec.InitContainers, installName)
}

func ksrMain(b *bundle) *corev1.Container {
	return container(b.ksr().Spec.Template.Spec.Containers, ksrName)
}

// hostPathOf returns the agent's hostPath volume of the host's path.
func hostPathOf(b *bundle, path string) *corev1.HostPathVolumeSource {
	for _, v := range b.agent().Spec.Template.Spec.Volumes {
		if v.HostPath != nil && v.HostPath.Path == path {
			return v.HostPath
		}
	}
	b.fixtureErr = errors.Join(b.fixtureErr, errors.New("no hostPath volume "+path))
	return &corev1.HostPathVolumeSource{}
}

// configMapData is the data of the generated ConfigMap prefix-<hash>.
func configMapData(b *bundle, prefix string) map[string]string {
	for _, cm := range all[*corev1.ConfigMap](b) {
		if strings.HasPrefix(cm.Name, prefix+"-") {
			return cm.Data
		}
	}
	b.fixtureErr = errors.Join(b.fixtureErr, errors.New("no ConfigMap "+prefix))
	return map[string]string{}
}

func setConf(b *bundle, prefix, file, data string) { configMapData(b, prefix)[file] = data }

func replaceConf(b *bundle, prefix, file, old, repl string) {
	d := configMapData(b, prefix)
	if !strings.Contains(d[file], old) {
		b.fixtureErr = errors.Join(b.fixtureErr, errors.New(file+" has no "+old))
	}
	d[file] = strings.Replace(d[file], old, repl, 1)
}

func setEnv(c *corev1.Container, name, value string) {
	delEnv(c, name)
	c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: value})
}

func delEnv(c *corev1.Container, name string) {
	for i, e := range c.Env {
		if e.Name == name {
			c.Env = append(c.Env[:i], c.Env[i+1:]...)
			return
		}
	}
}
