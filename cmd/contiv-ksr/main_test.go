package main

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd"
	"github.com/contiv-ipam/agent/infra/rest"
	"github.com/contiv-ipam/agent/plugins/ksr"
)

func envOf(kv map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

func TestVersionAndHelp(t *testing.T) {
	g := NewWithT(t)
	var out, errOut bytes.Buffer
	g.Expect(run([]string{"-version"}, &out, &errOut, envOf(nil))).To(Equal(0))
	g.Expect(out.String()).To(HavePrefix("contiv-ksr " + version))

	out.Reset()
	g.Expect(run([]string{"-h"}, &out, &errOut, envOf(nil))).To(Equal(0))
	for _, f := range []string{"-config-dir", "-ksr-config", "-kubeconfig", "-etcd-config", "-http-config", "-http-port", "-version"} {
		g.Expect(errOut.String()).To(ContainSubstring(f))
	}
}

// Bad input stops contiv-ksr before it connects anywhere, naming what was
// wrong.
func TestRefusesBadInputNamingIt(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("ksr.conf", "resyncPeriod: 0s\n")
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, "ksr.conf"), []byte("resyncPeriods: 1m\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	none := t.TempDir()
	if err := os.WriteFile(filepath.Join(none, "etcd.conf"), []byte("endpoints: [\"127.0.0.1:1\"]\nallow-delayed-start: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want []string
	}{
		{"invalid value", []string{"-config-dir", dir}, nil, []string{"resyncPeriod 0s", "at least 1s"}},
		{"unknown key", []string{"-config-dir", bad}, nil, []string{`"resyncPeriods"`, "ksr.conf"}},
		{"missing kubeconfig file", []string{"-config-dir", none, "-kubeconfig", "/nonexistent/kubeconfig"}, nil,
			[]string{`"/nonexistent/kubeconfig"`, "flag -kubeconfig"}},
		{"no kubeconfig outside a pod", []string{"-config-dir", none}, nil,
			[]string{"no kubeconfig", "-kubeconfig", "KUBERNETES_SERVICE_HOST"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			t.Setenv("KUBECONFIG", "") // plugins read the process environment
			var out, errOut bytes.Buffer
			g.Expect(run(c.args, &out, &errOut, envOf(c.env))).To(Equal(1))
			for _, w := range c.want {
				g.Expect(errOut.String()).To(ContainSubstring(w))
			}
		})
	}
}

// KUBECONFIG names the kubeconfig when no flag does (plugins read the
// process environment, so this test sets it).
func TestKubeconfigFromTheEnvironment(t *testing.T) {
	g := NewWithT(t)
	t.Setenv("KUBECONFIG", "/nonexistent/kc")
	var out, errOut bytes.Buffer
	g.Expect(run([]string{"-config-dir", t.TempDir()}, &out, &errOut, envOf(nil))).To(Equal(1))
	g.Expect(errOut.String()).To(ContainSubstring(`"/nonexistent/kc"`))
	g.Expect(errOut.String()).To(ContainSubstring("env KUBECONFIG"))
	g.Expect(errOut.String()).NotTo(ContainSubstring("plugin Init"), "refused before any plugin starts")
}

// The samples in conf/ksr/ run next to `make run`: contiv-ksr reaches the
// agent's embedded etcd and serves REST on its own port.
func TestLocalSamplesFitMakeRun(t *testing.T) {
	g := NewWithT(t)
	root := repoRoot()
	agentEtcd, ksrEtcd := etcd.DefaultConfig(), etcd.DefaultConfig()
	decode(t, filepath.Join(root, "conf", "etcd.conf"), &agentEtcd)
	decode(t, filepath.Join(root, "conf", "ksr", "etcd.conf"), &ksrEtcd)
	g.Expect(ksrEtcd.Endpoints).To(Equal([]string{strings.TrimPrefix(agentEtcd.EmbeddedClientURL, "http://")}))
	agentHTTP, ksrHTTP := rest.DefaultConfig(), rest.DefaultConfig()
	decode(t, filepath.Join(root, "conf", "http.conf"), &agentHTTP)
	decode(t, filepath.Join(root, "conf", "ksr", "http.conf"), &ksrHTTP)
	g.Expect(ksrHTTP.Endpoint).To(Equal(ksr.DefaultEndpoint))
	g.Expect(ksrHTTP.Endpoint).NotTo(Equal(agentHTTP.Endpoint))
}

func decode(t *testing.T, path string, ptr any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := config.Decode(data, ptr, path); err != nil {
		t.Fatal(err)
	}
}
