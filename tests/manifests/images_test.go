package manifests

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

// makeVars prints Makefile variables as make computes them.
func makeVars(names ...string) (map[string]string, error) {
	args := []string{"--eval", "print-%: ; @echo $*=$($*)"}
	for _, n := range names {
		args = append(args, "print-"+n)
	}
	out, err := makeCmd(args...).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("make %v: %w\n%s", args, err, out)
	}
	vars := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		vars[k] = v
	}
	return vars, nil
}

// makeImages returns AGENT_IMAGE, KSR_IMAGE and CAPI_IMAGE of the Makefile.
var makeImages = sync.OnceValues(func() (map[string]string, error) {
	return makeVars("AGENT_IMAGE", "KSR_IMAGE", "CAPI_IMAGE")
})

// wantImages maps each workload to the Makefile's image for it.
func wantImages(t *testing.T) map[string]string {
	t.Helper()
	vars, err := makeImages()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"AGENT_IMAGE", "KSR_IMAGE", "CAPI_IMAGE"} {
		if vars[k] == "" {
			t.Fatalf("the Makefile defines no %s", k)
		}
	}
	return map[string]string{agentName: vars["AGENT_IMAGE"], ksrName: vars["KSR_IMAGE"], capiName: vars["CAPI_IMAGE"]}
}

// checkImages: every container of the agent and contiv-ksr (init
// containers too) runs the image the Makefile builds for it, and a
// docker/<name>.Dockerfile builds it.
func checkImages(t *testing.T, b *bundle) []error {
	want := wantImages(t)
	cs, err := components(b)
	if err != nil {
		return []error{err}
	}
	var errs []error
	for _, c := range cs {
		for _, ctr := range slices.Concat(c.pod.InitContainers, c.pod.Containers) {
			if ctr.Image != want[c.name] {
				errs = append(errs, fmt.Errorf("%s is %q, but the Makefile builds %q (IMAGE_REPO, IMAGE_TAG; k8s/kustomization.yaml images:)",
					c.at("%s[%s].image", containerList(c, ctr.Name), ctr.Name), ctr.Image, want[c.name]))
			}
		}
		if _, err := readDockerfile(want[c.name]); err != nil {
			errs = append(errs, fmt.Errorf("no Dockerfile builds %s: %w", want[c.name], err))
		}
	}
	return errs
}

func containerList(c component, name string) string {
	if container(c.pod.InitContainers, name) != nil {
		return "initContainers"
	}
	return "containers"
}
