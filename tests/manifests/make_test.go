package manifests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// fakeEngines puts docker and podman scripts first on PATH: `info`
// succeeds for the engines in up, every other call is logged to the
// returned file, and `save -o <file>` creates the file. It returns the
// environment to run make with.
func fakeEngines(t *testing.T, up ...string) (env []string, log string) {
	t.Helper()
	dir := t.TempDir()
	log = filepath.Join(dir, "calls.log")
	for _, engine := range []string{"docker", "podman"} {
		rc := "1"
		for _, u := range up {
			if u == engine {
				rc = "0"
			}
		}
		script := "#!/bin/sh\nif [ \"$1\" = info ]; then exit " + rc + "; fi\necho \"$0 $*\" >> " + log + "\n" +
			"if [ \"$1\" = save ]; then prev=; for a; do if [ \"$prev\" = -o ]; then : > \"$a\"; fi; prev=$a; done; fi\n"
		if err := os.WriteFile(filepath.Join(dir, engine), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return []string{"PATH=" + dir + string(os.PathListSeparator) + os.Getenv("PATH")}, log
}

// runMakeImages runs `make images CONTAINER_ENGINE=<engine>` with env
// added, on the binaries `make static` built for the tests (-o static: not
// built again), into a temporary IMAGES_DIR; it returns the output, the
// engine calls, IMAGES_DIR and make's error.
func runMakeImages(t *testing.T, engine string, env []string, log string) (string, []string, string, error) {
	t.Helper()
	static := filepath.Dir(binary(t, "contiv-agent"))
	imagesDir := t.TempDir()
	cmd := makeCmd("-o", "static", "images", "CONTAINER_ENGINE="+engine, "STATIC_DIR="+static, "IMAGES_DIR="+imagesDir)
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	data, _ := os.ReadFile(log) // no file: no engine call
	return string(out), strings.Split(strings.TrimSpace(string(data)), "\n"), imagesDir, err
}

// With docker (or podman) asked for and its daemon down, make images fails,
// says so and points at buildah, which needs none.
func TestMakeImagesWithoutDaemon(t *testing.T) {
	for _, engine := range []string{"docker", "podman"} {
		t.Run(engine, func(t *testing.T) {
			g := NewWithT(t)
			env, log := fakeEngines(t)
			out, calls, _, err := runMakeImages(t, engine, env, log)
			g.Expect(err).To(HaveOccurred(), out)
			g.Expect(out).To(ContainSubstring("CONTAINER_ENGINE=" + engine + ", but '" + engine + " info' fails"))
			g.Expect(out).To(ContainSubstring("leave CONTAINER_ENGINE unset to build with buildah"))
			g.Expect(calls).To(Equal([]string{""}), "no build without a daemon")
		})
	}
}

// With docker or podman asked for and answering, make images builds the
// three Dockerfiles from the staged context, tagged with the images the
// manifests deploy, and saves each into IMAGES_DIR/<name>.tar (podman: as
// an OCI archive).
func TestMakeImagesWithDockerOrPodman(t *testing.T) {
	want := wantImages(t)
	for _, engine := range []string{"docker", "podman"} {
		t.Run(engine, func(t *testing.T) {
			g := NewWithT(t)
			env, log := fakeEngines(t, engine)
			out, calls, imagesDir, err := runMakeImages(t, engine, env, log)
			g.Expect(err).NotTo(HaveOccurred(), out)
			g.Expect(calls).To(HaveLen(6), out)
			prog := filepath.Join(filepath.Dir(log), engine)
			for i, name := range []string{agentName, ksrName, capiName} {
				build, save := calls[2*i], calls[2*i+1]
				g.Expect(build).To(HavePrefix(prog + " build "))
				g.Expect(build).To(ContainSubstring(" -t " + want[name] + " "))
				g.Expect(build).To(ContainSubstring(" -f docker/" + name + ".Dockerfile "))
				g.Expect(build).To(HaveSuffix(" "+filepath.Join(imagesDir, "context")), "the build context is the staged directory")
				tmp := filepath.Join(imagesDir, "."+name+".tar.tmp")
				if engine == "podman" {
					g.Expect(save).To(Equal(prog + " save --format oci-archive -o " + tmp + " " + want[name]))
				} else {
					g.Expect(save).To(Equal(prog + " save -o " + tmp + " " + want[name]))
				}
				g.Expect(filepath.Join(imagesDir, name+".tar")).To(BeARegularFile())
				g.Expect(out).To(ContainSubstring(filepath.Join(imagesDir, name+".tar")))
			}
			left, err := os.ReadDir(imagesDir)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(left).To(HaveLen(3), "the context is removed, no temporary is left")
		})
	}
}
