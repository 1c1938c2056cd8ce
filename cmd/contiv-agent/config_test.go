package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"testing"
	"time"

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
	"podmanager-config": "podmanager.conf",
}

// agentEnv is the environment of a test run of the binary: the variables
// the plugins read are cleared so that the machine's environment does not
// steer it, then extra ("NAME=value") is applied.
func agentEnv(extra ...string) []string {
	env := append(os.Environ(), "CONFIG_DIR=", "ETCD_ENDPOINTS=", "HTTP_PORT=", "INITIAL_LOGLVL=",
		"ACCEPT_NODE_ID_CHANGE=", "NODESYNC_PRESENCE_TTL=", "NODESYNC_CONFIG=", "MICROSERVICE_LABEL=n1")
	for flagName := range configFlags {
		env = append(env, config.EnvName(flagName)+"=")
	}
	return append(env, extra...)
}

// runToExit runs the binary in dir and returns its exit code and output.
// Each run here must be refused; an agent that is still running after
// refuseWithin accepted the config, and is killed.
func runToExit(t *testing.T, dir string, args []string, env ...string) (int, string) {
	t.Helper()
	const refuseWithin = 60 * time.Second
	cmd := exec.Command(agentBinary, args...)
	cmd.Dir, cmd.Env = dir, agentEnv(env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			return exitErr.ExitCode(), out.String()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, out.String()
	case <-time.After(refuseWithin):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("the agent still ran %v after start: it accepted a config it must refuse:\n%s", refuseWithin, out.String())
		return 0, ""
	}
}

// quickConfig writes a config directory whose agent starts without an
// embedded etcd (an unreachable endpoint, allow-delayed-start) and keeps
// every file in dir.
func quickConfig(t *testing.T, dir string) {
	t.Helper()
	writeRunConfig(t, dir, "127.0.0.1:0")
	writeFile(t, filepath.Join(dir, "ipam.conf"), "absentPodGracePeriod: 10m\n")
	writeFile(t, filepath.Join(dir, "etcd.conf"), "endpoints: [\"127.0.0.1:1\"]\nallow-delayed-start: true\ndial-timeout: 50ms\n"+
		"embedded-data-dir: "+filepath.Join(dir, "etcd")+"\n")
}

// TestHelpListsExactlyTheConfigFlagsThatWork checks the usage against the
// plugins that read a file (no -nodesync-config, -servicelabel-config),
// then shows that each listed flag is read: a file with an unknown key
// given through it fails start-up naming the file and the key.
func TestHelpListsExactlyTheConfigFlagsThatWork(t *testing.T) {
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
			code, out := runToExit(t, dir, []string{"-config-dir", dir, "-" + flagName, bad})
			g.Expect(code).To(Equal(1))
			g.Expect(out).To(ContainSubstring(bad))
			g.Expect(out).To(ContainSubstring(`unknown key "no-such-key"`))
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

// TestBadConfigCreatesNothing runs the agent with a config that cannot be
// right: it exits 1 naming the file (or directory) and the problem, and
// neither the embedded etcd's data directory nor bolt.db was created.
func TestBadConfigCreatesNothing(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, dir string) []string // returns extra args
		want  []string
	}{
		{"contiv.conf leaves no room for a pod (issue 9)", func(t *testing.T, dir string) []string {
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
		{"ipam.conf with a bad value (issue 9)", func(t *testing.T, dir string) []string {
			writeFile(t, filepath.Join(dir, "ipam.conf"), "absentPodGracePeriod: -1m\n")
			return nil
		}, []string{"plugin ipam: load config", "absentPodGracePeriod -1m0s: want a duration >= 0"}},
		{"controller.conf with an unknown key (issue 9)", func(t *testing.T, dir string) []string {
			writeFile(t, filepath.Join(dir, "controller.conf"), "delayRetri: 1s\n")
			return nil
		}, []string{"plugin controller: load config", `unknown key "delayRetri"`}},
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
			code, out := runToExit(t, dir, append([]string{"-config-dir", dir}, tc.setup(t, dir)...))
			g.Expect(code).To(Equal(1))
			for _, w := range tc.want {
				g.Expect(out).To(ContainSubstring(w))
			}
			g.Expect(filepath.Join(dir, "etcd")).NotTo(BeAnExistingFile(), "no etcd data directory")
			g.Expect(filepath.Join(dir, "data")).NotTo(BeAnExistingFile(), "no bolt.db directory")
		})
	}
}

// TestConfigDirThatCannotBeRight checks that a -config-dir or CONFIG_DIR
// that does not exist or is not a directory stops the agent, naming the
// flag or env and the path. (Every plugin's file is named by its env
// variable, so that an agent that ignored the directory would run on
// files in dir.)
func TestConfigDirThatCannotBeRight(t *testing.T) {
	dir := t.TempDir()
	quickConfig(t, dir)
	var files []string
	for flagName, file := range configFlags {
		files = append(files, config.EnvName(flagName)+"="+filepath.Join(dir, file))
	}
	file := filepath.Join(dir, "afile")
	writeFile(t, file, "")
	missing := filepath.Join(dir, "nope")
	cases := []struct {
		name string
		args []string
		env  string
		want string
	}{
		{"flag, missing", []string{"-config-dir", missing}, "", `config directory "` + missing + `" (flag -config-dir): does not exist`},
		{"env, missing", nil, missing, `config directory "` + missing + `" (env CONFIG_DIR): does not exist`},
		{"flag, a file", []string{"-config-dir", file}, "", `config directory "` + file + `" (flag -config-dir): not a directory`},
		{"env, a file", nil, file, `config directory "` + file + `" (env CONFIG_DIR): not a directory`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			code, out := runToExit(t, dir, tc.args, append(files, "CONFIG_DIR="+tc.env)...)
			g.Expect(code).To(Equal(1))
			g.Expect(out).To(ContainSubstring(tc.want))
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
