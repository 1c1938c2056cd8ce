//go:build node

package node

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/contiv-ipam/agent/tests/kubeenv"
)

// The images every node imports, by name: no registry is reached.
const (
	// PauseImage is the sandbox image (containerd's pinned
	// pinned_images.sandbox): the static program of tests/node/pause.
	PauseImage = "contiv.test/pause:1"
	// BusyboxImage holds Debian's busybox-static as /bin/busybox with a
	// link per applet the tests use; PodCommand keeps a container of it
	// running.
	BusyboxImage = "contiv.test/busybox:1"
	// busyboxHost is the static busybox on this machine (Debian
	// busybox-static; make node-bins installs it).
	busyboxHost = "/usr/bin/busybox"
)

// PodCommand runs in the containers of the busybox image: it ends at
// once on SIGTERM (a shell as process 1 would ignore it without a trap).
var PodCommand = []string{"/bin/sh", "-c", "trap 'exit 0' TERM INT; while true; do sleep 1 & wait $!; done"}

// busyboxApplets are the links of the busybox image.
var busyboxApplets = []string{"sh", "sleep", "ping", "ping6", "ip", "ifconfig", "route", "cat", "ls", "echo", "true",
	"false", "hostname", "wget", "nc", "ps", "env", "id", "mkdir", "rm", "touch", "date", "grep", "head", "tail", "wc"}

// BuildImages writes the OCI archives of PauseImage and BusyboxImage
// into dir and returns their paths: the pause program is built static
// with the go command of PATH (CGO_ENABLED=0, tag node).
func BuildImages(dir string) (pause, busybox string, err error) {
	if _, err := os.Stat(busyboxHost); err != nil {
		return "", "", fmt.Errorf("node: %w: the busybox image needs Debian's busybox-static (make node-bins installs it)", err)
	}
	bin := filepath.Join(dir, "pause")
	build := exec.Command("go", "build", "-tags", "node", "-trimpath", "-ldflags", "-s -w", "-o", bin, "./tests/node/pause")
	build.Dir = kubeenv.RepoRoot()
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("node: build tests/node/pause: %w: %s", err, out)
	}
	pause, busybox = filepath.Join(dir, "pause.tar"), filepath.Join(dir, "busybox.tar")
	err = OCIImage{Name: PauseImage, Entrypoint: []string{"/pause"},
		Files: []ImageFile{{Path: "pause", Source: bin, Mode: 0o755}}}.WriteArchive(pause)
	if err != nil {
		return "", "", err
	}
	files := []ImageFile{{Path: "bin/busybox", Source: busyboxHost, Mode: 0o755}}
	for _, a := range busyboxApplets {
		files = append(files, ImageFile{Path: "bin/" + a, Link: "busybox"})
	}
	for _, d := range []string{"etc", "tmp", "proc", "sys", "dev", "root"} {
		files = append(files, ImageFile{Path: d, Mode: fs.ModeDir | 0o755})
	}
	files = append(files, ImageFile{Path: "etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/bin/sh\n")},
		ImageFile{Path: "etc/group", Mode: 0o644, Data: []byte("root:x:0:\n")})
	err = OCIImage{Name: BusyboxImage, Cmd: []string{"/bin/sh"}, Env: []string{"PATH=/bin"}, Files: files}.WriteArchive(busybox)
	if err != nil {
		return "", "", err
	}
	return pause, busybox, nil
}
