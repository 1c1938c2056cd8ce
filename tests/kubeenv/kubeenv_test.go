package kubeenv_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/contiv-ipam/agent/tests/kubeenv"
)

// The directory name in the code is the one the Makefile builds into.
func TestVersionMatchesTheMakefile(t *testing.T) {
	g := NewWithT(t)
	mk, err := os.ReadFile(filepath.Join(kubeenv.RepoRoot(), "Makefile"))
	g.Expect(err).NotTo(HaveOccurred())
	m := regexp.MustCompile(`(?m)^KUBE_VERSION\s*:=\s*(\S+)`).FindSubmatch(mk)
	g.Expect(m).NotTo(BeNil(), "KUBE_VERSION in the Makefile")
	g.Expect(string(m[1])).To(Equal(kubeenv.Version))
}

// A real API server: a Node created with the clientset is listed by
// kubectl through the kubeconfig file.
func TestAPIServerAndKubectl(t *testing.T) {
	g := NewWithT(t)
	env := kubeenv.StartT(t)
	_, err := env.Client.CoreV1().Nodes().Create(t.Context(), &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Spec:       corev1.NodeSpec{PodCIDR: "10.1.1.0/24"},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	out, err := env.KubectlCmd(t.Context(), "get", "nodes", "-o", "jsonpath={.items[*].spec.podCIDR}").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	g.Expect(strings.TrimSpace(string(out))).To(Equal("10.1.1.0/24"))
}
