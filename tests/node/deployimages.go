//go:build node

package node

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/contiv-ipam/agent/tests/kubeenv"
)

// ShippedImages are the archives `make images` writes (docker/): the
// images k8s/ deploys.
var ShippedImages = []string{"contiv-agent", "contiv-ksr", "contiv-capi-ipam"}

// ImageBuild is a run of `make images` in the background.
type ImageBuild struct {
	// Dir is its IMAGES_DIR; StaticDir its STATIC_DIR (the static
	// binaries the images hold, contiv-cni among them).
	Dir, StaticDir string

	cmd    *exec.Cmd
	out    bytes.Buffer
	start  time.Time
	exited chan struct{} // closed once make is reaped
	err    error         // make's exit error; read after exited
}

// StartMakeImages starts `make images` with IMAGES_DIR and STATIC_DIR
// under dir: the repository's images as they are now, built with buildah
// (no daemon, no registry), the machine's image store and the
// repository's bin/static untouched. IMAGE_REPO, IMAGE_TAG and
// CONTAINER_ENGINE of the environment are left out (the default names,
// the ones k8s/ deploys).
func StartMakeImages(dir string) (*ImageBuild, error) {
	b := &ImageBuild{Dir: filepath.Join(dir, "images"), StaticDir: filepath.Join(dir, "static"),
		exited: make(chan struct{})}
	b.cmd = exec.Command("make", "-s", "--no-print-directory", "-C", kubeenv.RepoRoot(), "images",
		"IMAGES_DIR="+b.Dir, "STATIC_DIR="+b.StaticDir)
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains([]string{"IMAGE_REPO", "IMAGE_TAG", "CONTAINER_ENGINE", "MAKEFLAGS", "MFLAGS"}, name) {
			b.cmd.Env = append(b.cmd.Env, kv)
		}
	}
	b.cmd.Stdout, b.cmd.Stderr = &b.out, &b.out
	// Its own process group, for Stop; killed with the test process.
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	b.start = time.Now()
	if err := b.cmd.Start(); err != nil {
		return nil, fmt.Errorf("make images: %w", err)
	}
	go func() {
		b.err = b.cmd.Wait()
		close(b.exited)
	}()
	return b, nil
}

// Wait waits for the build and returns the archives by image name
// (contiv-agent: IMAGES_DIR/contiv-agent.tar) and how long it took.
func (b *ImageBuild) Wait(ctx context.Context) (map[string]string, time.Duration, error) {
	select {
	case <-b.exited:
		took := time.Since(b.start)
		if b.err != nil {
			return nil, took, fmt.Errorf("make images: %w: %s", b.err, lastLines(b.out.String(), 20))
		}
		out := map[string]string{}
		for _, name := range ShippedImages {
			out[name] = filepath.Join(b.Dir, name+".tar")
		}
		return out, took, nil
	case <-ctx.Done():
		b.Stop()
		return nil, time.Since(b.start), fmt.Errorf("make images: %w", ctx.Err())
	}
}

// Stop kills the build's process group if it still runs (a test that
// ends before Wait) and waits for make; it may be called again.
func (b *ImageBuild) Stop() {
	select {
	case <-b.exited:
	default:
		_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		<-b.exited
	}
}

// ArchiveImageName is the image name an OCI archive's index gives its
// manifest (org.opencontainers.image.ref.name when it is a full
// reference, as buildah writes it, else io.containerd.image.name).
func ArchiveImageName(archive string) (string, error) {
	data, err := readTarFile(archive, "index.json")
	if err != nil {
		return "", err
	}
	var index struct {
		Manifests []struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(data, &index); err != nil {
		return "", fmt.Errorf("index.json of %s: %w", archive, err)
	}
	for _, m := range index.Manifests {
		if name := m.Annotations[AnnotationImageName]; name != "" {
			return name, nil
		}
		if name := m.Annotations[annotationRefName]; strings.Contains(name, "/") {
			return name, nil
		}
	}
	return "", fmt.Errorf("%s: no image name in index.json", archive)
}

// readTarFile returns the contents of the file name in the tar archive.
func readTarFile(archive, name string) ([]byte, error) {
	f, err := os.Open(archive)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err != nil {
			return nil, fmt.Errorf("%s in %s: %w", name, archive, err)
		}
		if path.Clean(h.Name) == name {
			return io.ReadAll(tr)
		}
	}
}

// EtcdImageRepo is the name of the etcd image BuildEtcdImage writes (the
// tag is the etcd version).
const EtcdImageRepo = "contiv.test/etcd"

// EtcdVersion is the version of envtest's etcd server ("v3.6.16" of
// kubeenv.Version), the one k8s/contiv-etcd.yaml deploys.
func EtcdVersion() string {
	_, v, _ := strings.Cut(kubeenv.Version, "-etcd")
	return "v" + v
}

// BuildEtcdImage writes an OCI archive of an image holding envtest's
// etcd server as /usr/local/bin/etcd (where the upstream image has it),
// with the shared libraries it loads (ldd), into dir, and returns its
// path and name (EtcdImageRepo:EtcdVersion()).
func BuildEtcdImage(dir string) (archive, name string, err error) {
	assets, err := kubeenv.AssetsDir()
	if err != nil {
		return "", "", err
	}
	etcd := filepath.Join(assets, "etcd")
	files := []ImageFile{{Path: "usr/local/bin/etcd", Source: etcd, Mode: 0o755}}
	libs, err := sharedLibraries(etcd)
	if err != nil {
		return "", "", err
	}
	for _, lib := range libs {
		files = append(files, ImageFile{Path: lib, Source: lib, Mode: 0o755})
	}
	for _, d := range []string{"tmp", "var/lib/etcd"} {
		files = append(files, ImageFile{Path: d, Mode: os.ModeDir | 0o755})
	}
	name = EtcdImageRepo + ":" + EtcdVersion()
	archive = filepath.Join(dir, "etcd.tar")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	err = OCIImage{Name: name, Entrypoint: []string{"/usr/local/bin/etcd"}, Files: files}.WriteArchive(archive)
	return archive, name, err
}

// lddPath matches the absolute paths of ldd's output ("libc.so.6 =>
// /lib/x86_64-linux-gnu/libc.so.6 (0x...)", "/lib64/ld-linux-x86-64.so.2
// (0x...)").
var lddPath = regexp.MustCompile(`(?m)(?:=>\s+|^\s+)(/\S+)\s+\(0x`)

// sharedLibraries are the absolute paths of the libraries bin loads
// (none for a static binary).
func sharedLibraries(bin string) ([]string, error) {
	out, err := exec.Command("ldd", bin).CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "not a dynamic executable") {
			return nil, nil
		}
		return nil, fmt.Errorf("ldd %s: %w: %s", bin, err, out)
	}
	var libs []string
	for _, m := range lddPath.FindAllStringSubmatch(string(out), -1) {
		libs = append(libs, m[1])
	}
	return libs, nil
}

// cniPluginsVersion is the containernetworking-plugins release of ptp
// (NodeBinsVersion's "ptp-v1.9.1").
func cniPluginsVersion() string {
	_, v, _ := strings.Cut(NodeBinsVersion, "ptp-")
	return v
}

// Portmap returns the CNI plugin portmap of ptp's release (k8s/'s
// conflist chains it after ptp, and at cniVersion 1.1.0 every plugin of
// the chain must speak it; Debian's is older): the runtime directory's
// if it holds one, else built into dir with `go install` (CGO_ENABLED=0,
// from the module cache or the Go module proxy; a second or so once the
// build cache holds it).
func (n *Node) Portmap(dir string) (string, error) {
	if p := filepath.Join(n.Bins.Runtime, "portmap"); fileExists(p) {
		return p, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	cmd := exec.Command("go", "install", "github.com/containernetworking/plugins/plugins/meta/portmap@"+cniPluginsVersion())
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOBIN="+dir, "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install portmap@%s: %w: %s", cniPluginsVersion(), err, out)
	}
	return filepath.Join(dir, "portmap"), nil
}

// fileExists tells whether path names an existing file.
func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
