package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd"
)

// configFlags are the -<name>-config flags of the plugins that read a file:
// flag -> the file's base name in the config directory.
var configFlags = map[string]string{
	"http-config":       "http.conf",
	"etcd-config":       "etcd.conf",
	"bolt-config":       "bolt.conf",
	"health-config":     "health.conf",
	"logmanager-config": "logmanager.conf",
	"metrics-config":    "metrics.conf",
	"controller-config": "controller.conf",
	"contiv-config":     "contiv.conf",
	"ipam-config":       "ipam.conf",
}

// isolateEnv clears the environment variables the plugins read, so that
// the machine's environment does not steer an in-process run.
func isolateEnv(t *testing.T) {
	t.Helper()
	for _, name := range []string{"CONFIG_DIR", "ETCD_ENDPOINTS", "HTTP_PORT", "MICROSERVICE_LABEL", "INITIAL_LOGLVL",
		"ACCEPT_NODE_ID_CHANGE", "NODESYNC_PRESENCE_TTL"} {
		t.Setenv(name, "")
	}
	for flagName := range configFlags {
		t.Setenv(config.EnvName(flagName), "")
	}
	t.Setenv("NODESYNC_CONFIG", "")
}

// quickConfig writes a config directory whose agent starts without an
// embedded etcd (an unreachable endpoint, allow-delayed-start) and keeps
// every file in dir: data/bolt.db, the embedded etcd's dir etcd (unused).
func quickConfig(t *testing.T, dir string) {
	t.Helper()
	writeFile(t, filepath.Join(dir, "etcd.conf"), "endpoints: [\"127.0.0.1:1\"]\nallow-delayed-start: true\ndial-timeout: 50ms\n"+
		"embedded-data-dir: "+filepath.Join(dir, "etcd")+"\n")
	writeFile(t, filepath.Join(dir, "bolt.conf"), "db-path: "+filepath.Join(dir, "data", "bolt.db")+"\n")
	writeFile(t, filepath.Join(dir, "http.conf"), "endpoint: 127.0.0.1:0\n")
}

// TestHelpListsExactlyTheConfigFlagsThatWork checks the usage against the
// plugins that read a file (no -nodesync-config, -servicelabel-config),
// then shows that each listed flag is read: a file with an unknown key
// given through it fails start-up naming the file and the key.
func TestHelpListsExactlyTheConfigFlagsThatWork(t *testing.T) {
	isolateEnv(t)
	var out, errOut bytes.Buffer
	NewWithT(t).Expect(run([]string{"-h"}, &out, &errOut, envOf(nil))).To(Equal(0))
	var listed []string
	for _, m := range regexp.MustCompile(`(?m)^\s+-(\S+-config)\b`).FindAllStringSubmatch(errOut.String(), -1) {
		listed = append(listed, m[1])
	}
	var want []string
	for f := range configFlags {
		want = append(want, f)
	}
	sort.Strings(want)
	NewWithT(t).Expect(listed).To(ConsistOf(want), "usage:\n%s", errOut.String())

	for _, flagName := range want {
		t.Run(flagName, func(t *testing.T) {
			g := NewWithT(t)
			dir := t.TempDir()
			quickConfig(t, dir)
			bad := writeBad(t, dir, flagName)
			out.Reset()
			errOut.Reset()
			code := run([]string{"-config-dir", dir, "-" + flagName, bad, "-microservice-label", "n1"}, &out, &errOut, envOf(nil))
			g.Expect(code).To(Equal(1))
			g.Expect(errOut.String()).To(ContainSubstring(bad))
			g.Expect(errOut.String()).To(ContainSubstring(`unknown key "no-such-key"`))
		})
	}
}

// writeBad writes a file with every key of the plugin's file in dir plus
// an unknown one.
func writeBad(t *testing.T, dir, flagName string) string {
	t.Helper()
	path := filepath.Join(dir, "bad-"+configFlags[flagName])
	body := ""
	if data, err := os.ReadFile(filepath.Join(dir, configFlags[flagName])); err == nil {
		body = string(data)
	}
	writeFile(t, path, body+"no-such-key: 1\n")
	return path
}

// TestBadConfigCreatesNothing runs the agent in-process with a config that
// cannot be right: it exits 1 naming the file (or directory) and the
// problem, and neither the embedded etcd's data directory nor bolt.db was
// created.
func TestBadConfigCreatesNothing(t *testing.T) {
	isolateEnv(t)
	cases := []struct {
		name  string
		setup func(t *testing.T, dir string) []string // returns extra args
		want  []string
	}{
		{"contiv.conf leaves no room for a pod", func(t *testing.T, dir string) []string {
			writeFile(t, filepath.Join(dir, "contiv.conf"), "ipamConfig:\n  podSubnetOneNodePrefixLen: 30\n")
			return nil
		}, []string{"plugin contivconf: load config", "contiv.conf: ipamConfig.podSubnetOneNodePrefixLen 30", "use at most 29"}},
		{"contiv.conf with an unknown key", func(t *testing.T, dir string) []string {
			writeFile(t, filepath.Join(dir, "contiv.conf"), "ipamConfig:\n  podSubnetCIRD: 10.1.0.0/16\n")
			return nil
		}, []string{`unknown key "ipamConfig.podSubnetCIRD"`}},
		{"bolt.conf with a bad value", func(t *testing.T, dir string) []string {
			writeFile(t, filepath.Join(dir, "bolt.conf"), "db-path: "+filepath.Join(dir, "data", "bolt.db")+"\nfile-mode: \"0999\"\n")
			return nil
		}, []string{"plugin bolt: load config", "file-mode"}},
		{"etcd.conf with a bad value", func(t *testing.T, dir string) []string {
			writeFile(t, filepath.Join(dir, "etcd.conf"), "embedded: true\nembedded-data-dir: "+filepath.Join(dir, "etcd")+
				"\ndial-timeout: -1s\n")
			return nil
		}, []string{"plugin etcd: load config", "dial-timeout"}},
		{"ipam.conf is a directory", func(t *testing.T, dir string) []string {
			NewWithT(t).Expect(os.Mkdir(filepath.Join(dir, "ipam.conf"), 0o755)).To(Succeed())
			return nil
		}, []string{"plugin ipam: load config", "ipam.conf", "(no -ipam-config or IPAM_CONFIG given: the default in the directory of flag -config-dir): is a directory, want a file"}},
		{"controller.conf is not YAML", func(t *testing.T, dir string) []string {
			writeFile(t, filepath.Join(dir, "controller.conf"), "delayRetry: [\n")
			return nil
		}, []string{"plugin controller: load config", "controller.conf: invalid YAML"}},
		{"-contiv-config names a missing file", func(t *testing.T, dir string) []string {
			return []string{"-contiv-config", filepath.Join(dir, "nope.conf")}
		}, []string{`config file "`, `nope.conf" (flag -contiv-config): not found`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			dir := t.TempDir()
			writeRunConfig(t, dir, "127.0.0.1:0")
			args := append([]string{"-config-dir", dir, "-microservice-label", "n1"}, tc.setup(t, dir)...)
			var out, errOut bytes.Buffer
			g.Expect(run(args, &out, &errOut, envOf(nil))).To(Equal(1))
			for _, w := range tc.want {
				g.Expect(errOut.String()).To(ContainSubstring(w))
			}
			g.Expect(filepath.Join(dir, "etcd")).NotTo(BeAnExistingFile(), "no etcd data directory")
			g.Expect(filepath.Join(dir, "data")).NotTo(BeAnExistingFile(), "no bolt.db directory")
		})
	}
}

// TestConfigDirThatCannotBeRight checks that a -config-dir or CONFIG_DIR
// that does not exist or is not a directory stops the agent, naming the
// flag or env and the path.
func TestConfigDirThatCannotBeRight(t *testing.T) {
	isolateEnv(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "afile")
	writeFile(t, file, "")
	cases := []struct {
		name string
		args []string
		env  string
		want string
	}{
		{"flag, missing", []string{"-config-dir", filepath.Join(dir, "nope")}, "",
			`config directory "` + filepath.Join(dir, "nope") + `" (flag -config-dir): does not exist`},
		{"env, missing", nil, filepath.Join(dir, "nope"),
			`config directory "` + filepath.Join(dir, "nope") + `" (env CONFIG_DIR): does not exist`},
		{"flag, a file", []string{"-config-dir", file}, "", `config directory "` + file + `" (flag -config-dir): not a directory`},
		{"env, a file", nil, file, `config directory "` + file + `" (env CONFIG_DIR): not a directory`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			t.Setenv("CONFIG_DIR", tc.env)
			var out, errOut bytes.Buffer
			g.Expect(run(append(tc.args, "-microservice-label", "n1"), &out, &errOut, envOf(nil))).To(Equal(1))
			g.Expect(errOut.String()).To(ContainSubstring(tc.want))
		})
	}
}

// An empty etcd.conf (no endpoints) and no ETCD_ENDPOINTS starts a private
// embedded etcd: on loopback, data under ./_data/etcd (README.md says so).
func TestEmptyEtcdConfMeansEmbedded(t *testing.T) {
	g := NewWithT(t)
	c := etcd.DefaultConfig()
	g.Expect(config.Decode(nil, &c, "etcd.conf")).To(Succeed())
	c.Normalize(func(string) (string, bool) { return "", false })
	g.Expect(c.Embedded).To(BeTrue())
	g.Expect(c.EmbeddedDataDir).To(Equal("_data/etcd"))
	g.Expect(c.EmbeddedClientURL).To(Equal("http://127.0.0.1:2379"))
	g.Expect(c.EmbeddedPeerURL).To(Equal("http://127.0.0.1:2380"))
	g.Expect(c.Validate()).To(Succeed())
}

// TestAgentBinaryRefusesBadContivConfBeforeCreatingFiles is the reported
// fault with the real binary: a contiv.conf that fails validation used to
// be refused only after the etcd data dir and bolt.db were created.
func TestAgentBinaryRefusesBadContivConfBeforeCreatingFiles(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	writeRunConfig(t, dir, "127.0.0.1:0")
	writeFile(t, filepath.Join(dir, "contiv.conf"), "ipamConfig:\n  podSubnetOneNodePrefixLen: 30\n")
	p := startAgent(t, dir)
	var last string
	for rec := range p.lines {
		last, _ = rec["msg"].(string)
	}
	g.Expect(<-p.done).To(MatchError("exit status 1"))
	g.Expect(last).To(ContainSubstring(filepath.Join(dir, "contiv.conf") + ": ipamConfig.podSubnetOneNodePrefixLen 30"))
	g.Expect(filepath.Join(dir, "etcd")).NotTo(BeAnExistingFile())
	g.Expect(filepath.Join(dir, "data")).NotTo(BeAnExistingFile())
}
