// Package kubeenv runs a real Kubernetes API server for the tests and for
// `make demo`: kube-apiserver and etcd from the binaries `make kube-bins`
// builds (tests/kubebin), started by controller-runtime's envtest on
// loopback, with an admin kubeconfig written to a file and the kubectl
// of the same release.
//
// Owner: an Env belongs to the goroutine that started it; Stop ends both
// processes and removes their data. Caller duties: run `make kube-bins`
// first (`make test` does), or point KUBEBUILDER_ASSETS at a directory
// holding kube-apiserver, etcd and kubectl.
package kubeenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Version names the binaries: the Kubernetes release and the etcd server
// pinned by tests/kubebin/go.mod. It must equal KUBE_VERSION in the
// Makefile (a test checks).
const Version = "v1.36.3-etcd3.6.16"

// EnvAssets names the directory of the binaries when set (envtest's own
// variable; the Makefile exports it).
const EnvAssets = "KUBEBUILDER_ASSETS"

// binaries are the files the assets directory must hold.
var binaries = []string{"kube-apiserver", "etcd", "kubectl"}

// Env is a running API server with its etcd.
type Env struct {
	// Config reaches the API server as an admin (system:masters).
	Config *rest.Config
	// Client is a clientset on Config.
	Client kubernetes.Interface
	// Kubeconfig is the path of a kubeconfig file for Config.
	Kubeconfig string
	// Kubectl is the path of the kubectl binary of the same release.
	Kubectl string

	env *envtest.Environment
}

// RepoRoot is the root of the repository (where go.mod is).
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// AssetsDir returns the directory of kube-apiserver, etcd and kubectl:
// $KUBEBUILDER_ASSETS, else _cache/kube/<Version> in the repository. The
// error names the missing file and how to build it.
func AssetsDir() (string, error) {
	dir := os.Getenv(EnvAssets)
	if dir == "" {
		dir = filepath.Join(RepoRoot(), "_cache", "kube", Version)
	}
	for _, b := range binaries {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return "", fmt.Errorf("kubeenv: %s is missing in %s (%v): run `make kube-bins` (or set %s)", b, dir, err, EnvAssets)
		}
	}
	return dir, nil
}

// Option changes the API server Start runs.
type Option func(*envtest.Environment)

// WithCRDs installs the CRDs of the YAML files in dirs (relative to the
// repository root) before Start returns; a missing directory is an error.
func WithCRDs(dirs ...string) Option {
	return func(te *envtest.Environment) {
		for _, d := range dirs {
			te.CRDDirectoryPaths = append(te.CRDDirectoryPaths, filepath.Join(RepoRoot(), d))
		}
		te.ErrorIfCRDPathMissing = true
	}
}

// Start runs the API server and its etcd, and writes the kubeconfig into
// dir (which must exist).
func Start(dir string, opts ...Option) (*Env, error) {
	assets, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	te := &envtest.Environment{BinaryAssetsDirectory: assets}
	for _, o := range opts {
		o(te)
	}
	cfg, err := te.Start()
	if err != nil {
		return nil, fmt.Errorf("kubeenv: start kube-apiserver and etcd from %s: %w", assets, err)
	}
	e := &Env{Config: cfg, Kubectl: filepath.Join(assets, "kubectl"), env: te}
	if err := e.finish(dir); err != nil {
		return nil, errors.Join(err, e.Stop())
	}
	return e, nil
}

// finish builds the clientset and writes the kubeconfig.
func (e *Env) finish(dir string) error {
	client, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return fmt.Errorf("kubeenv: clientset: %w", err)
	}
	e.Client = client
	e.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(e.Kubeconfig, e.env.KubeConfig, 0o600); err != nil {
		return fmt.Errorf("kubeenv: write kubeconfig: %w", err)
	}
	return nil
}

// Stop ends the API server and its etcd.
func (e *Env) Stop() error {
	if err := e.env.Stop(); err != nil {
		return fmt.Errorf("kubeenv: stop: %w", err)
	}
	return nil
}

// KubectlCmd is kubectl with args against this API server.
func (e *Env) KubectlCmd(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, e.Kubectl, append([]string{"--kubeconfig", e.Kubeconfig}, args...)...)
}

// StartT is Start for a test: the kubeconfig goes into t.TempDir(), Stop
// runs at cleanup, and an error fails the test.
func StartT(t testing.TB, opts ...Option) *Env {
	t.Helper()
	e, err := Start(t.TempDir(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Error(err)
		}
	})
	return e
}
