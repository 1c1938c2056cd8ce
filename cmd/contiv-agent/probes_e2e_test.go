package main

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/contiv-ipam/agent/infra/rest"
	"github.com/contiv-ipam/agent/infra/rest/resttest"
)

// manifestProbe is one httpGet probe of k8s/contiv-agent.yaml.
type manifestProbe struct {
	name   string // "livenessProbe"
	scheme string // "http" or "https"
	host   string
	path   string
	port   int
}

// agentManifestProbes reads the liveness and readiness probes of the
// contiv-agent container of k8s/contiv-agent.yaml, and the shipped
// http.conf of its ConfigMap (k8s/config/agent/http.conf).
func agentManifestProbes(t *testing.T) (probes []manifestProbe, httpConf string) {
	t.Helper()
	g := NewWithT(t)
	k8s := filepath.Join(repoRoot(t), "k8s")
	data, err := os.ReadFile(filepath.Join(k8s, "contiv-agent.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	var ds appsv1.DaemonSet
	g.Expect(yaml.UnmarshalStrict(data, &ds)).To(Succeed())
	var main *corev1.Container
	for i, c := range ds.Spec.Template.Spec.Containers {
		if c.Name == "contiv-agent" {
			main = &ds.Spec.Template.Spec.Containers[i]
		}
	}
	g.Expect(main).NotTo(BeNil(), "k8s/contiv-agent.yaml: no container contiv-agent")
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
	}{{"livenessProbe", main.LivenessProbe}, {"readinessProbe", main.ReadinessProbe}} {
		g.Expect(p.probe).NotTo(BeNil(), p.name)
		get := p.probe.HTTPGet
		g.Expect(get).NotTo(BeNil(), p.name+".httpGet")
		g.Expect(get.HTTPHeaders).To(BeEmpty(), p.name+" sends no header, as the kubelet's probes of the manifest")
		port := get.Port.IntValue()
		if get.Port.StrVal != "" {
			for _, cp := range main.Ports {
				if cp.Name == get.Port.StrVal {
					port = int(cp.ContainerPort)
				}
			}
		}
		scheme := strings.ToLower(string(get.Scheme))
		if scheme == "" {
			scheme = "http"
		}
		probes = append(probes, manifestProbe{name: p.name, scheme: scheme, host: get.Host, path: get.Path, port: port})
	}
	conf, err := os.ReadFile(filepath.Join(k8s, "config", "agent", "http.conf"))
	g.Expect(err).NotTo(HaveOccurred())
	return probes, string(conf)
}

// probeURL is where the kubelet would send p to an agent whose REST server
// listens on actualPort: the manifest's scheme, host and path, the port
// replaced (the test agent listens on a free port, not the manifest's).
func probeURL(p manifestProbe, actualPort string) string {
	host := p.host
	if host == "" {
		host = "127.0.0.1"
	}
	return (&url.URL{Scheme: p.scheme, Host: net.JoinHostPort(host, actualPort), Path: p.path}).String()
}

// startAgentWithHTTPConf runs the agent binary with the run config of the
// other e2e tests, http.conf replaced by conf and the port of its endpoint
// by a free one (HTTP_PORT=0, as -http-port does on a node); it returns
// the agent and its REST port.
func startAgentWithHTTPConf(t *testing.T, conf string) (*agentProc, string) {
	t.Helper()
	dir := t.TempDir()
	writeRunConfig(t, dir, "127.0.0.1:0")
	writeFile(t, filepath.Join(dir, "http.conf"), conf)
	p := startAgent(t, dir, "HTTP_PORT=0")
	base := p.waitReady(t)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("REST base %q: %v", base, err)
	}
	return p, u.Port()
}

// kubeletGet sends a probe as the kubelet does: no credentials, no client
// certificate, and an HTTPS server's certificate not verified.
func kubeletGet(t *testing.T, target string) (int, string, error) {
	t.Helper()
	// The kubelet's HTTPS probes verify no server certificate.
	cl := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12},
	}}
	defer cl.CloseIdleConnections()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, target, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := cl.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// expectProbesPass GETs each probe as the kubelet would until it answers
// 200 (readiness waits for the first DB resync) with the two states only.
func expectProbesPass(t *testing.T, probes []manifestProbe, port string) {
	t.Helper()
	g := NewWithT(t)
	for _, p := range probes {
		target := probeURL(p, port)
		g.Eventually(func(g Gomega) {
			status, body, err := kubeletGet(t, target)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(status).To(Equal(http.StatusOK), body)
			g.Expect(body).To(MatchJSON(`{"state": "ok", "live": "ok"}`))
		}).WithTimeout(30*time.Second).WithPolling(100*time.Millisecond).Should(Succeed(), "%s GET %s", p.name, target)
	}
}

// The probes of k8s/contiv-agent.yaml pass against the real agent binary
// run with the shipped http.conf plus client-basic-auth: the kubelet sends
// no credentials, and only the probe paths answer it.
func TestManifestProbesPassWithBasicAuth(t *testing.T) {
	g := NewWithT(t)
	probes, conf := agentManifestProbes(t)
	endpoint := confEndpoint(t, conf)
	_, confPort, err := net.SplitHostPort(endpoint)
	g.Expect(err).NotTo(HaveOccurred())
	paths := map[string]bool{}
	for _, p := range probes {
		g.Expect(strconv.Itoa(p.port)).To(Equal(confPort), "%s.port: the shipped http.conf listens on %s", p.name, endpoint)
		g.Expect(p.scheme).To(Equal("http"), "%s.scheme: the shipped http.conf serves plain HTTP", p.name)
		g.Expect(rest.ProbePaths()).To(ContainElement(p.path), "%s.path must be a probe path the server serves without credentials", p.name)
		paths[p.path] = true
	}
	g.Expect(paths).To(HaveLen(2), "one liveness and one readiness path")

	_, port := startAgentWithHTTPConf(t, conf+"\nclient-basic-auth: [\"admin:s3cret\"]\n")
	expectProbesPass(t, probes, port)

	base := "http://127.0.0.1:" + port
	for _, path := range []string{"/", "/contiv/v1/ipam", "/metrics"} {
		status, body, err := kubeletGet(t, base+path)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(status).To(Equal(http.StatusUnauthorized), "GET %s without credentials: %s", path, body)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/readiness", nil)
	g.Expect(err).NotTo(HaveOccurred())
	req.SetBasicAuth("admin", "s3cret")
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	g.Expect(string(body)).To(ContainSubstring(`"plugins"`), "an authenticated client gets the whole status")
}

// With HTTPS and client certificates, the probes of k8s/contiv-agent.yaml
// with scheme HTTPS (as its comment says to set) pass as the kubelet sends
// them: no client certificate, the server's not verified.
func TestManifestProbesPassWithClientCertificates(t *testing.T) {
	g := NewWithT(t)
	probes, conf := agentManifestProbes(t)
	pki := resttest.NewPKI(t)
	conf += "\nserver-cert-file: " + strconv.Quote(pki.ServerCertFile) + "\nserver-key-file: " + strconv.Quote(pki.ServerKeyFile) +
		"\nclient-cert-files: [" + strconv.Quote(pki.CAFile) + "]\n"
	_, port := startAgentWithHTTPConf(t, conf)
	for i := range probes {
		probes[i].scheme = "https"
	}
	expectProbesPass(t, probes, port)

	base := "https://127.0.0.1:" + port
	status, body, err := kubeletGet(t, base+"/contiv/v1/ipam")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status).To(Equal(http.StatusForbidden), body)
	status, body, err = kubeletGet(t, "http://127.0.0.1:"+port+probes[0].path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status).To(Equal(http.StatusBadRequest), "a probe without scheme HTTPS fails: %s", body)

	ops := pki.Client("ops")
	defer ops.CloseIdleConnections()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/contiv/v1/ipam", nil)
	g.Expect(err).NotTo(HaveOccurred())
	resp, err := ops.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
}

// confEndpoint is the endpoint key of an http.conf.
func confEndpoint(t *testing.T, conf string) string {
	t.Helper()
	var c struct {
		Endpoint string `json:"endpoint"`
	}
	if err := yaml.Unmarshal([]byte(conf), &c); err != nil {
		t.Fatalf("http.conf: %v", err)
	}
	if c.Endpoint == "" {
		return rest.DefaultEndpoint
	}
	return c.Endpoint
}
