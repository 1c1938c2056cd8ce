package manifests

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/contiv-ipam/agent/infra/command"
	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd"
	"github.com/contiv-ipam/agent/infra/logging"
	"github.com/contiv-ipam/agent/tests/kubeenv"
)

// staticBinaries are what `make static` builds (and the images hold).
var staticBinaries = []string{"contiv-agent", "contiv-cni", "contiv-ksr", "contiv-capi-ipam"}

// staticDir is where `make static` built them (removed by TestMain).
var staticDir string

// buildStatic runs `make static` once per test binary.
var buildStatic = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "manifests-static-")
	if err != nil {
		return "", err
	}
	staticDir = dir
	out, err := makeCmd("static", "STATIC_DIR="+dir).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("make static STATIC_DIR=%s: %w\n%s", dir, err, out)
	}
	return dir, nil
})

func TestMain(m *testing.M) {
	code := m.Run()
	if staticDir != "" {
		_ = os.RemoveAll(staticDir)
	}
	os.Exit(code)
}

// makeCmd is make in the repository root, with the image variables taken
// from the Makefile rather than from the caller's environment.
func makeCmd(args ...string) *exec.Cmd {
	cmd := exec.Command("make", append([]string{"-s", "--no-print-directory", "-C", kubeenv.RepoRoot()}, args...)...)
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains([]string{"IMAGE_REPO", "IMAGE_TAG", "CONTAINER_ENGINE", "MAKEFLAGS", "MFLAGS"}, name) {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	return cmd
}

// binary returns the path of a `make static` binary.
func binary(t *testing.T, name string) string {
	t.Helper()
	dir, err := buildStatic()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, name)
}

var flagLine = regexp.MustCompile(`(?m)^\s+-([a-z0-9][a-z0-9-]*)`)

// binaryFlags lists the flags `<name> -h` prints.
func binaryFlags(t *testing.T, name string) []string {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(binary(t, name), "-h")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s -h: %v\n%s", name, err, out.String())
	}
	var flags []string
	for _, m := range flagLine.FindAllStringSubmatch(out.String(), -1) {
		flags = append(flags, m[1])
	}
	if len(flags) == 0 {
		t.Fatalf("%s -h lists no flags:\n%s", name, out.String())
	}
	return flags
}

// binaryConfFiles lists the <plugin>.conf files the binary reads: one per
// -<plugin>-config flag.
func binaryConfFiles(t *testing.T, name string) []string {
	t.Helper()
	var files []string
	for _, f := range binaryFlags(t, name) {
		if p, ok := strings.CutSuffix(f, "-config"); ok {
			files = append(files, p+".conf")
		}
	}
	return files
}

// binaryEnv lists the environment variables the binary reads: one per flag
// (config.Lookup's fallback), plus those of the command runner, the
// logging registry and, with an etcd plugin, ETCD_ENDPOINTS.
func binaryEnv(t *testing.T, name string) []string {
	t.Helper()
	env := []string{command.EnvStartTimeout, command.EnvStopTimeout, command.EnvLogFormat, logging.EnvInitialLevel}
	for _, f := range binaryFlags(t, name) {
		if f == "version" {
			continue // a flag only
		}
		env = append(env, config.EnvName(f))
		if f == "etcd-config" {
			env = append(env, etcd.EnvEndpoints)
		}
	}
	slices.Sort(env)
	return env
}
