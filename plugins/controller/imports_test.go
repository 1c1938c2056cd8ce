package controller_test

import (
	"os/exec"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// Arrows point down: the framework (controller and its subpackages) may
// use the Kubernetes-state models but no handler's package.
func TestControllerImportsNoHandler(t *testing.T) {
	g := NewWithT(t)
	goTool, err := exec.LookPath("go")
	g.Expect(err).NotTo(HaveOccurred(), "the go command is needed to list imports")
	const module = "github.com/contiv-ipam/agent/"
	out, err := exec.Command(goTool, "list", "-deps", module+"plugins/controller/...").Output()
	g.Expect(err).NotTo(HaveOccurred())
	allowed := []string{module + "plugins/controller", module + "plugins/ksr/model/"}
	var bad []string
	for _, pkg := range strings.Fields(string(out)) {
		if !strings.HasPrefix(pkg, module+"plugins/") {
			continue
		}
		ok := false
		for _, a := range allowed {
			ok = ok || strings.HasPrefix(pkg, a)
		}
		if !ok {
			bad = append(bad, pkg)
		}
	}
	g.Expect(bad).To(BeEmpty(), "plugins/controller/... imports handler packages")
}
