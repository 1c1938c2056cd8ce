package ksr

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

const testKubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`

// The kubeconfig comes from the flag, else KUBECONFIG, else ksr.conf,
// else (inside a pod) the service account; the error says which was
// tried.
func TestKubeconfigResolution(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(good, []byte(testKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, flag, conf string
		env              map[string]string
		wantOrigin       string
		wantErr          []string
	}{
		{name: "flag", flag: good, env: map[string]string{"KUBECONFIG": "/nonexistent"}, wantOrigin: "flag -kubeconfig"},
		{name: "env", env: map[string]string{"KUBECONFIG": good}, conf: "/nonexistent", wantOrigin: "env KUBECONFIG"},
		{name: "ksr.conf", conf: good, wantOrigin: "ksr.conf kubeconfig"},
		{name: "missing file", flag: "/nonexistent/kc", wantErr: []string{`"/nonexistent/kc"`, "flag -kubeconfig"}},
		{name: "nothing outside a pod", wantErr: []string{"no kubeconfig", "KUBERNETES_SERVICE_HOST is unset"}},
		{name: "in a pod without a service account", env: map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1"},
			wantErr: []string{"in-cluster config"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			p := NewPlugin(UseEnv(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }))
			p.RegisterFlags(fs)
			var args []string
			if tc.flag != "" {
				args = []string{"-kubeconfig", tc.flag}
			}
			g.Expect(fs.Parse(args)).To(Succeed())
			c := DefaultConfig()
			c.Kubeconfig = tc.conf
			rc, origin, err := p.kubeConfig(c)
			if tc.wantErr != nil {
				for _, w := range tc.wantErr {
					g.Expect(err).To(MatchError(ContainSubstring(w)))
				}
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(rc.Host).To(Equal("https://127.0.0.1:6443"))
			g.Expect(origin).To(ContainSubstring(tc.wantOrigin))
		})
	}
}

// The client is throttled at kubeQPS and kubeBurst, not client-go's 5/10.
func TestClientUsesKubeQPS(t *testing.T) {
	g := NewWithT(t)
	file := filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(os.WriteFile(file, []byte(testKubeconfig), 0o600)).To(Succeed())
	c := DefaultConfig()
	c.Kubeconfig, c.KubeQPS, c.KubeBurst = file, 70, 140
	p := NewPlugin(UseConf(c), UseEnv(func(string) (string, bool) { return "", false }))
	p.RegisterFlags(flag.NewFlagSet("t", flag.ContinueOnError))
	loaded, err := p.loadConfig()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.initClient(loaded)).To(Succeed())
	g.Expect(loaded.rest.QPS).To(Equal(float32(70)))
	g.Expect(loaded.rest.Burst).To(Equal(140))
}
