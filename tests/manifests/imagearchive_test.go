package manifests

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
)

// The OCI image layout as `make images` writes it (image-spec v1.1), only
// the fields the test reads.
type (
	ociDescriptor struct {
		MediaType   string            `json:"mediaType"`
		Digest      string            `json:"digest"`
		Size        int64             `json:"size"`
		Annotations map[string]string `json:"annotations"`
	}
	ociIndex struct {
		Manifests []ociDescriptor `json:"manifests"`
	}
	ociManifest struct {
		Config ociDescriptor   `json:"config"`
		Layers []ociDescriptor `json:"layers"`
	}
	ociConfig struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
		Config       struct {
			User       string   `json:"User"`
			Entrypoint []string `json:"Entrypoint"`
			Cmd        []string `json:"Cmd"`
			Env        []string `json:"Env"`
		} `json:"config"`
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
)

// ociImage is an image read from an OCI archive.
type ociImage struct {
	// refName is the manifest's org.opencontainers.image.ref.name: the name
	// `ctr images import` gives the image (or io.containerd.image.name,
	// which wins when present).
	refName, containerdName string
	config                  ociConfig
	// files are the layers' entries by absolute path; root holds them
	// extracted.
	files map[string]*tar.Header
	root  string
}

// readOCIArchive opens an archive, checks every digest and size the index,
// the manifest and the config name, and extracts the layers into root.
func readOCIArchive(archive, root string) (*ociImage, error) {
	f, err := os.Open(archive)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	entries := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", archive, err)
		}
		if h.Typeflag == tar.TypeReg {
			if entries[path.Clean(h.Name)], err = io.ReadAll(tr); err != nil {
				return nil, fmt.Errorf("%s: %s: %w", archive, h.Name, err)
			}
		}
	}
	if layout := string(entries["oci-layout"]); !strings.Contains(layout, `"imageLayoutVersion"`) {
		return nil, fmt.Errorf("%s: no oci-layout file (%q): not an OCI archive", archive, layout)
	}
	blob := func(d ociDescriptor) ([]byte, error) {
		hexDigest, ok := strings.CutPrefix(d.Digest, "sha256:")
		data, found := entries["blobs/sha256/"+hexDigest]
		switch sum := sha256.Sum256(data); {
		case !ok || !found:
			return nil, fmt.Errorf("%s: no blob %s", archive, d.Digest)
		case hex.EncodeToString(sum[:]) != hexDigest || int64(len(data)) != d.Size:
			return nil, fmt.Errorf("%s: blob %s has digest sha256:%x and size %d, its descriptor size %d", archive, d.Digest, sum, len(data), d.Size)
		}
		return data, nil
	}
	var index ociIndex
	if err := json.Unmarshal(entries["index.json"], &index); err != nil {
		return nil, fmt.Errorf("%s: index.json: %w", archive, err)
	}
	if len(index.Manifests) != 1 || index.Manifests[0].MediaType != "application/vnd.oci.image.manifest.v1+json" {
		return nil, fmt.Errorf("%s: index.json lists %+v, want one OCI image manifest", archive, index.Manifests)
	}
	img := &ociImage{
		refName:        index.Manifests[0].Annotations["org.opencontainers.image.ref.name"],
		containerdName: index.Manifests[0].Annotations["io.containerd.image.name"],
		files:          map[string]*tar.Header{},
		root:           root,
	}
	var m ociManifest
	if data, err := blob(index.Manifests[0]); err != nil {
		return nil, err
	} else if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s: manifest: %w", archive, err)
	}
	if data, err := blob(m.Config); err != nil {
		return nil, err
	} else if err := json.Unmarshal(data, &img.config); err != nil {
		return nil, fmt.Errorf("%s: config: %w", archive, err)
	}
	if len(m.Layers) != len(img.config.RootFS.DiffIDs) {
		return nil, fmt.Errorf("%s: %d layers, %d diff_ids", archive, len(m.Layers), len(img.config.RootFS.DiffIDs))
	}
	for i, l := range m.Layers {
		data, err := blob(l)
		if err != nil {
			return nil, err
		}
		diffID, err := img.extract(l.MediaType, data)
		if err != nil {
			return nil, fmt.Errorf("%s: layer %s: %w", archive, l.Digest, err)
		}
		if diffID != img.config.RootFS.DiffIDs[i] {
			return nil, fmt.Errorf("%s: layer %s is %s uncompressed, the config's diff_id %s", archive, l.Digest, diffID, img.config.RootFS.DiffIDs[i])
		}
	}
	return img, nil
}

// extract unpacks a layer into img.root and returns its diff ID.
func (img *ociImage) extract(mediaType string, data []byte) (string, error) {
	var r io.Reader = bytes.NewReader(data)
	switch mediaType {
	case "application/vnd.oci.image.layer.v1.tar+gzip":
		zr, err := gzip.NewReader(r)
		if err != nil {
			return "", err
		}
		r = zr
	case "application/vnd.oci.image.layer.v1.tar":
	default:
		return "", fmt.Errorf("media type %s: want a tar or tar+gzip layer", mediaType)
	}
	digest := sha256.New()
	tee := io.TeeReader(r, digest)
	tr := tar.NewReader(tee)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", err
		}
		name := path.Clean("/" + h.Name)
		if strings.HasPrefix(path.Base(name), ".wh.") {
			return "", fmt.Errorf("whiteout %s: the images are one layer FROM scratch", name)
		}
		img.files[name] = h
		dst := filepath.Join(img.root, filepath.FromSlash(name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(dst, 0o755)
		case tar.TypeSymlink:
			if err = os.MkdirAll(filepath.Dir(dst), 0o755); err == nil {
				err = os.Symlink(h.Linkname, dst)
			}
		case tar.TypeReg:
			err = writeFile(dst, tr, h.FileInfo().Mode().Perm())
		default:
			err = fmt.Errorf("%s: unexpected entry type %q", name, h.Typeflag)
		}
		if err != nil {
			return "", err
		}
	}
	if _, err := io.Copy(io.Discard, tee); err != nil { // the tar's end padding
		return "", err
	}
	return fmt.Sprintf("sha256:%x", digest.Sum(nil)), nil
}

func writeFile(dst string, r io.Reader, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	return errors.Join(err, f.Close())
}

// resolve follows symlinks in the image from p to a file that is not one.
func (img *ociImage) resolve(p string) (string, error) {
	for range 10 {
		h, ok := img.files[p]
		switch {
		case !ok:
			return "", fmt.Errorf("%s is not in the image", p)
		case h.Typeflag != tar.TypeSymlink:
			return p, nil
		case path.IsAbs(h.Linkname):
			p = path.Clean(h.Linkname)
		default:
			p = path.Join(path.Dir(p), h.Linkname)
		}
	}
	return "", fmt.Errorf("%s: too many symlinks", p)
}

// nonDirs lists the image's entries that are not directories.
func (img *ociImage) nonDirs() []string {
	var out []string
	for p, h := range img.files {
		if h.Typeflag != tar.TypeDir {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// scriptCommands lists the commands a shell script runs: the first word of
// each simple command (after a newline, ;, &&, ||, |, $( or a backquote),
// without assignments, keywords and the builtins no image needs a file for.
func scriptCommands(script string) []string {
	for _, sep := range []string{"$(", "`", "&&", "||", ";", "|"} {
		script = strings.ReplaceAll(script, sep, "\n")
	}
	skip := []string{"for", "done", "fi", "esac", "}", "set", "export", "cd", "exit", "return", "shift", "unset", "local", "read", "trap", "eval", "exec", "wait", ":"}
	var cmds []string
	for _, line := range strings.Split(script, "\n") {
		words := strings.Fields(line)
		for len(words) > 0 && slices.Contains([]string{"do", "then", "else", "elif", "if", "while", "until", "!", "{", "("}, words[0]) {
			words = words[1:]
		}
		if len(words) == 0 || strings.Contains(words[0], "=") || slices.Contains(skip, words[0]) {
			continue
		}
		if w := strings.Trim(words[0], `"')`); !slices.Contains(cmds, w) {
			cmds = append(cmds, w)
		}
	}
	slices.Sort(cmds)
	return cmds
}

// imageWants is what each image holds: its binaries under /usr/local/bin
// (the first is the entrypoint), its user and whether it has busybox.
var imageWants = []struct {
	name     string
	binaries []string
	user     string
	busybox  bool
}{
	{agentName, []string{"contiv-agent", "contiv-cni"}, "0:0", true},
	{ksrName, []string{"contiv-ksr"}, "65532:65532", false},
	{capiName, []string{"contiv-capi-ipam"}, "65532:65532", false},
}

// `make images` (buildah, no registry, no daemon) writes an OCI archive of
// each image, named as the manifests deploy it, holding exactly the static
// binaries (and, for the agent, busybox with the applets the install-cni
// script runs), with the entrypoint and user the workloads expect; the
// binaries run, and the install-cni script runs with the image's own shell.
func TestMakeImagesWritesTheDeployedImages(t *testing.T) {
	g := NewWithT(t)
	want := wantImages(t)
	vars, err := makeVars("AGENT_APPLETS")
	g.Expect(err).NotTo(HaveOccurred())
	applets := strings.Fields(vars["AGENT_APPLETS"])
	g.Expect(applets).To(ContainElement("sh"), "AGENT_APPLETS")

	// buildah's own state stays in IMAGES_DIR: where the machine has no
	// /var/lib/containers or /run/containers, the build creates neither.
	machineDirs := []string{"/var/lib/containers", "/run/containers"}
	var absent []string
	for _, d := range machineDirs {
		if _, err := os.Stat(d); errors.Is(err, os.ErrNotExist) {
			absent = append(absent, d)
		}
	}
	dir := t.TempDir()
	imagesDir := filepath.Join(dir, "images")
	start := time.Now()
	out, err := makeCmd("images", "STATIC_DIR="+filepath.Join(dir, "static"), "IMAGES_DIR="+imagesDir).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	t.Logf("make images: %s", time.Since(start).Round(time.Millisecond))
	for _, d := range absent {
		g.Expect(d).NotTo(BeAnExistingFile(), "make images created %s", d)
	}
	left, err := os.ReadDir(imagesDir)
	g.Expect(err).NotTo(HaveOccurred())
	var names []string
	for _, e := range left {
		names = append(names, e.Name())
	}
	g.Expect(names).To(ConsistOf("contiv-agent.tar", "contiv-ksr.tar", "contiv-capi-ipam.tar"), "IMAGES_DIR holds the archives only (no storage, no context)")

	b := render(t)
	for _, w := range imageWants {
		t.Run(w.name, func(t *testing.T) {
			g := NewWithT(t)
			archive := filepath.Join(imagesDir, w.name+".tar")
			g.Expect(string(out)).To(ContainSubstring(archive), "make images prints where the archive is")
			img, err := readOCIArchive(archive, t.TempDir())
			g.Expect(err).NotTo(HaveOccurred())
			if st, err := os.Stat(archive); err == nil {
				t.Logf("%s: %d MiB", archive, st.Size()>>20)
			}

			g.Expect(img.refName).To(Equal(want[w.name]), "org.opencontainers.image.ref.name: the name ctr images import gives it")
			if img.containerdName != "" {
				g.Expect(img.containerdName).To(Equal(want[w.name]), "io.containerd.image.name")
			}
			g.Expect(img.config.OS + "/" + img.config.Architecture).To(Equal("linux/" + runtime.GOARCH))
			g.Expect(img.config.Config.Entrypoint).To(Equal([]string{"/usr/local/bin/" + w.binaries[0]}))
			g.Expect(img.config.Config.Cmd).To(BeEmpty())
			g.Expect(img.config.Config.User).To(Equal(w.user))

			wantFiles := []string{}
			for _, bin := range w.binaries {
				p := "/usr/local/bin/" + bin
				wantFiles = append(wantFiles, p)
				g.Expect(img.files).To(HaveKey(p))
				g.Expect(img.files[p].Typeflag).To(Equal(byte(tar.TypeReg)), p)
				g.Expect(img.files[p].FileInfo().Mode().Perm()).To(Equal(os.FileMode(0o755)), p)
				g.Expect(staticELF(filepath.Join(img.root, p))).To(Succeed())
				version, err := exec.Command(filepath.Join(img.root, p), "-version").CombinedOutput()
				g.Expect(err).NotTo(HaveOccurred(), "%s -version: %s", p, version)
				g.Expect(string(version)).To(HavePrefix(bin+" "), "%s -version", p)
			}
			if w.busybox {
				wantFiles = append(wantFiles, "/bin/busybox")
				for _, a := range applets {
					wantFiles = append(wantFiles, "/bin/"+a)
				}
				checkBusybox(t, img, b)
			}
			slices.Sort(wantFiles)
			g.Expect(img.nonDirs()).To(Equal(wantFiles), "the image holds these files and nothing else")
			checkImageUser(t, b, w.name, w.user)
		})
	}
}

// checkBusybox: the image's /bin/busybox is a static ELF file, /bin/sh and
// every command of the install-cni script resolve to it, PATH finds them,
// and the script, run by that shell with nothing else on PATH, installs
// contiv-cni and the conflist in a sandbox.
func checkBusybox(t *testing.T, img *ociImage, b *bundle) {
	g := NewWithT(t)
	g.Expect(staticELF(filepath.Join(img.root, "bin", "busybox"))).To(Succeed())
	g.Expect(img.config.Config.Env).To(ContainElement(MatchRegexp(`^PATH=(.*:)?/bin(:.*)?$`)), "PATH lists /bin")

	c, err := agentComponent(b)
	g.Expect(err).NotTo(HaveOccurred())
	ctr := container(c.pod.InitContainers, installName)
	g.Expect(ctr).NotTo(BeNil())
	g.Expect(ctr.Command).To(HaveLen(2))
	g.Expect(ctr.Command[0]).To(Equal("/bin/sh"))
	g.Expect(ctr.Args).To(HaveLen(1))
	cmds := scriptCommands(ctr.Args[0])
	g.Expect(cmds).To(ContainElements("cp", "mv"), "the install script's commands")
	for _, cmd := range append([]string{"sh"}, cmds...) {
		target, err := img.resolve("/bin/" + cmd)
		g.Expect(err).NotTo(HaveOccurred(), "the install script runs %s (AGENT_APPLETS in the Makefile)", cmd)
		g.Expect(target).To(Equal("/bin/busybox"), "/bin/%s", cmd)
	}

	// The script, with the sandbox's directories for the mounts.
	field := c.at("initContainers[%s]", installName)
	dockerfile, err := readDockerfile(ctr.Image)
	g.Expect(err).NotTo(HaveOccurred())
	sb, err := newSandbox(t, b, c, ctr)
	g.Expect(err).NotTo(HaveOccurred())
	env := []string{"PATH=" + filepath.Join(img.root, "bin")}
	for _, e := range ctr.Env {
		v := e.Value
		if strings.HasPrefix(v, "/") {
			v, err = sb.path(v, dockerfile)
			g.Expect(err).NotTo(HaveOccurred(), "env %s", e.Name)
		}
		env = append(env, e.Name+"="+v)
	}
	sh := exec.Command(filepath.Join(img.root, "bin", "sh"), append(ctr.Command[1:], ctr.Args...)...)
	sh.Env, sh.Dir = env, sb.root
	res, err := sh.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "the image's /bin/sh runs the install script: %s", res)
	g.Expect(sb.verify(field, conflists(b, c, ctr))).To(BeEmpty())
}

// checkImageUser: where the workload names a user, it is the image's.
func checkImageUser(t *testing.T, b *bundle, name, user string) {
	var pod *corev1.PodSpec
	switch name {
	case agentName:
		pod = &b.agent().Spec.Template.Spec
	case ksrName:
		pod = &b.ksr().Spec.Template.Spec
	default:
		return // k8s/capi-ipam is another kustomization (capi_test.go)
	}
	for _, ctr := range pod.Containers {
		var uid *int64
		if pod.SecurityContext != nil && pod.SecurityContext.RunAsUser != nil {
			uid = pod.SecurityContext.RunAsUser
		}
		if ctr.SecurityContext != nil && ctr.SecurityContext.RunAsUser != nil {
			uid = ctr.SecurityContext.RunAsUser
		}
		if uid != nil {
			imageUID, _, _ := strings.Cut(user, ":")
			NewWithT(t).Expect(fmt.Sprint(*uid)).To(Equal(imageUID), "%s container %s runAsUser: the image's USER %s", name, ctr.Name, user)
		}
	}
}

func TestScriptCommands(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		want         []string
	}{
		{"simple", "cp a b\nmv b c", []string{"cp", "mv"}},
		{"substitution and loop", "set -eu\nfor f in *; do\n  name=$(basename \"$f\")\n  echo $name | tr a b\ndone", []string{"basename", "echo", "tr"}},
		{"conditions", "if [ -f x ]; then chmod 0755 x && ln -s x y || true; fi", []string{"[", "chmod", "ln", "true"}},
		{"assignment only", "x=1; export x", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(scriptCommands(tc.script)).To(Equal(tc.want))
		})
	}
}
