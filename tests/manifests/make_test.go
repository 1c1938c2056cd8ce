package manifests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/tests/kubeenv"
)

// fakeEngines puts docker and podman scripts first on PATH: `info`
// succeeds for the engines in up, every other call is logged to the
// returned file. It returns the environment to run make with.
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
		script := "#!/bin/sh\nif [ \"$1\" = info ]; then exit " + rc + "; fi\necho \"$0 $*\" >> " + log + "\n"
		if err := os.WriteFile(filepath.Join(dir, engine), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return []string{"PATH=" + dir + string(os.PathListSeparator) + os.Getenv("PATH")}, log
}

// runMakeImages runs `make images` with env added; it returns the output,
// the engine calls and make's error.
func runMakeImages(t *testing.T, env []string, log string) (string, []string, error) {
	t.Helper()
	cmd := makeCmd("images")
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	data, _ := os.ReadFile(log) // no file: no engine call
	return string(out), strings.Split(strings.TrimSpace(string(data)), "\n"), err
}

// Without a container engine, make images fails and says where the
// Dockerfiles are.
func TestMakeImagesWithoutEngine(t *testing.T) {
	g := NewWithT(t)
	env, log := fakeEngines(t)
	out, calls, err := runMakeImages(t, env, log)
	g.Expect(err).To(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("no container engine is available"))
	g.Expect(out).To(ContainSubstring("the Dockerfiles are in docker/"))
	g.Expect(calls).To(Equal([]string{""}), "no build without an engine")
}

// With docker (or, failing that, podman) answering, make images builds
// the three Dockerfiles from the repository root, tagged with the images the
// manifests deploy.
func TestMakeImagesBuildsTheDeployedImages(t *testing.T) {
	want := wantImages(t)
	for _, engine := range []string{"docker", "podman"} {
		t.Run(engine, func(t *testing.T) {
			g := NewWithT(t)
			env, log := fakeEngines(t, engine)
			out, calls, err := runMakeImages(t, env, log)
			g.Expect(err).NotTo(HaveOccurred(), out)
			g.Expect(calls).To(HaveLen(3), out)
			for i, name := range []string{agentName, ksrName, capiName} {
				call := calls[i]
				g.Expect(call).To(HavePrefix(filepath.Join(filepath.Dir(log), engine) + " build "))
				g.Expect(call).To(ContainSubstring(" -t " + want[name] + " "))
				g.Expect(call).To(ContainSubstring(" -f docker/" + name + ".Dockerfile "))
				g.Expect(call).To(HaveSuffix(" ."), "the build context is the repository root")
				g.Expect(filepath.Join(kubeenv.RepoRoot(), "docker", name+".Dockerfile.dockerignore")).To(BeARegularFile())
				if engine == "podman" {
					g.Expect(call).To(ContainSubstring(" --ignorefile docker/" + name + ".Dockerfile.dockerignore "))
				}
			}
		})
	}
}
