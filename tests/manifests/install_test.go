package manifests

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/contiv-ipam/agent/tests/kubeenv"
)

// dockerfile is the final stage of a docker/<image>.Dockerfile: its base
// image and the files it copies (path in the image -> source base name).
type dockerfile struct {
	path  string
	base  string
	files map[string]string
}

// imageName is the repository's last element: contiv-agent for
// ghcr.io/contiv-ipam/contiv-agent:v1.
func imageName(image string) string {
	image, _, _ = strings.Cut(image, "@")
	name := path.Base(image)
	name, _, _ = strings.Cut(name, ":")
	return name
}

// readDockerfile parses docker/<imageName(image)>.Dockerfile.
func readDockerfile(image string) (*dockerfile, error) {
	p := filepath.Join(kubeenv.RepoRoot(), "docker", imageName(image)+".Dockerfile")
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", image, err)
	}
	defer func() { _ = f.Close() }()
	d := &dockerfile{path: p}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) >= 2 && fields[0] == "FROM":
			d.base, d.files = firstArg(fields[1:]), map[string]string{}
		case len(fields) >= 3 && fields[0] == "COPY":
			d.addCopy(fields[1:])
		}
	}
	return d, sc.Err()
}

// firstArg is the first argument that is not a --flag.
func firstArg(args []string) string {
	for _, a := range args {
		if !strings.HasPrefix(a, "--") {
			return a
		}
	}
	return ""
}

// addCopy records COPY [--flags] src... dest.
func (d *dockerfile) addCopy(args []string) {
	var srcs []string
	for _, a := range args {
		if !strings.HasPrefix(a, "--") {
			srcs = append(srcs, a)
		}
	}
	dest := srcs[len(srcs)-1]
	for _, s := range srcs[:len(srcs)-1] {
		target := dest
		if strings.HasSuffix(dest, "/") {
			target = dest + path.Base(s)
		}
		d.files[target] = path.Base(s)
	}
}

// sandbox maps the mounts of the init container to temporary directories.
type sandbox struct {
	root   string
	mounts map[string]string // mountPath -> directory
	hosts  map[string]string // hostPath of the host -> directory
}

func newSandbox(t *testing.T, b *bundle, c component, ctr *corev1.Container) (*sandbox, error) {
	sb := &sandbox{root: t.TempDir(), mounts: map[string]string{}, hosts: map[string]string{}}
	for i, m := range ctr.VolumeMounts {
		dir := filepath.Join(sb.root, fmt.Sprintf("mount%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		sb.mounts[m.MountPath] = dir
		v := volume(c.pod, m.Name)
		switch {
		case v != nil && v.HostPath != nil:
			sb.hosts[v.HostPath.Path] = dir
		case v != nil && v.ConfigMap != nil && b.configMap(v.ConfigMap.Name) != nil:
			for k, data := range b.configMap(v.ConfigMap.Name).Data {
				if err := os.WriteFile(filepath.Join(dir, k), []byte(data), 0o644); err != nil {
					return nil, err
				}
			}
		}
	}
	return sb, nil
}

// path maps a path of the container to the sandbox: under a mount, or a
// file of the image (written as "image file <name>").
func (sb *sandbox) path(p string, img *dockerfile) (string, error) {
	for mp, dir := range sb.mounts {
		if p == mp || strings.HasPrefix(p, mp+"/") {
			return dir + strings.TrimPrefix(p, mp), nil
		}
	}
	name, ok := img.files[p]
	if !ok {
		return "", fmt.Errorf("%q is neither under a volumeMount nor a file %s copies (%v)", p, filepath.Base(img.path), img.files)
	}
	f := filepath.Join(sb.root, "image", name)
	if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
		return "", err
	}
	return f, os.WriteFile(f, []byte("image file "+name), 0o644)
}

// checkInstall runs the init container's command in a sandbox: /bin/sh
// from the image base, its absolute-path variables mapped to temporary
// directories. contiv-cni must land in the host's /opt/cni/bin (mode
// 0755) and every conflist in /etc/cni/net.d, with no temporary left.
func checkInstall(t *testing.T, b *bundle) []error {
	c, err := agentComponent(b)
	if err != nil {
		return []error{err}
	}
	ctr := container(c.pod.InitContainers, installName)
	if ctr == nil {
		return []error{fmt.Errorf("%s: no init container %s", c.at("initContainers"), installName)}
	}
	field := c.at("initContainers[%s]", installName)
	img, err := readDockerfile(ctr.Image)
	if err != nil {
		return []error{fmt.Errorf("%s.image: %w", field, err)}
	}
	// A distroless or scratch stage has a shell only if it copies busybox
	// (whose applets, /bin/sh among them, the image archive test checks).
	noShell := strings.Contains(img.base, "distroless") || img.base == "scratch"
	if len(ctr.Command) > 0 && ctr.Command[0] == "/bin/sh" && noShell && img.files["/bin/busybox"] == "" {
		return []error{fmt.Errorf("%s.command runs /bin/sh, but %s's final stage (%s) has no shell", field, filepath.Base(img.path), img.base)}
	}
	sb, err := newSandbox(t, b, c, ctr)
	if err != nil {
		return []error{err}
	}
	if err := sb.run(ctr, img); err != nil {
		return []error{fmt.Errorf("%s: %w", field, err)}
	}
	return sb.verify(field, conflists(b, c, ctr))
}

// run runs the container's command with its variables mapped.
func (sb *sandbox) run(ctr *corev1.Container, img *dockerfile) error {
	env := []string{"PATH=" + os.Getenv("PATH")}
	for _, e := range ctr.Env {
		v := e.Value
		if strings.HasPrefix(v, "/") {
			p, err := sb.path(v, img)
			if err != nil {
				return fmt.Errorf("env %s: %w", e.Name, err)
			}
			v = p
		}
		env = append(env, e.Name+"="+v)
	}
	argv := append(append([]string{}, ctr.Command...), ctr.Args...)
	if len(argv) == 0 {
		return fmt.Errorf("no command")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = env, sb.root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("command failed in the sandbox: %w\n%s", err, out)
	}
	return nil
}

// verify looks at what the command left in the host directories.
func (sb *sandbox) verify(field string, lists map[string]string) []error {
	var errs []error
	binDir, confDir := sb.hosts[hostCNIBinDir], sb.hosts[hostCNIConfDir]
	if binDir == "" || confDir == "" {
		return []error{fmt.Errorf("%s: mounts no hostPath %s or %s", field, hostCNIBinDir, hostCNIConfDir)}
	}
	bin := filepath.Join(binDir, "contiv-cni")
	data, err := os.ReadFile(bin)
	if st, serr := os.Stat(bin); err != nil || serr != nil || st.Mode().Perm() != 0o755 || string(data) != "image file contiv-cni" {
		errs = append(errs, fmt.Errorf("%s: want the image's contiv-cni in the host's %s/contiv-cni with mode 0755; got %q (%v)",
			field, hostCNIBinDir, data, err))
	}
	for name, want := range lists {
		got, err := os.ReadFile(filepath.Join(confDir, name))
		if err != nil || string(got) != want {
			errs = append(errs, fmt.Errorf("%s: the host's %s/%s is not the ConfigMap's (%v)", field, hostCNIConfDir, name, err))
		}
	}
	for _, dir := range []string{binDir, confDir} {
		left, _ := filepath.Glob(filepath.Join(dir, ".*")) // the pattern is valid
		if len(left) > 0 {
			errs = append(errs, fmt.Errorf("%s: temporary files left on the host: %v", field, left))
		}
	}
	return errs
}
