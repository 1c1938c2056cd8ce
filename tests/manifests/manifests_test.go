package manifests

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/contiv-ipam/agent/tests/kubeenv"
)

// checks are the consistency checks of the rendered kustomization; each
// returns one error per disagreement, naming the manifest field and both
// values.
var checks = map[string]func(*testing.T, *bundle) []error{
	"images":       checkImages,
	"rest":         checkREST,
	"host dirs":    checkHostDirs,
	"conflist":     checkConflist,
	"install":      checkInstall,
	"etcd":         checkEtcd,
	"config files": checkConfigFiles,
	"env names":    checkEnvNames,
	"access":       checkAccess,
}

// The manifests as shipped pass every check.
func TestManifestsAgreeWithTheCode(t *testing.T) {
	for name, check := range checks {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(messages(check(t, render(t)))).To(BeEmpty())
		})
	}
}

// The objects of k8s/: kind/name (a generated ConfigMap without its hash).
var wantObjects = []string{
	"Service/contiv-etcd", "Service/contiv-etcd-peer", "StatefulSet/contiv-etcd",
	"ServiceAccount/contiv-ksr", "ClusterRole/contiv-ksr", "ClusterRoleBinding/contiv-ksr", "Deployment/contiv-ksr",
	"DaemonSet/contiv-agent",
	"ConfigMap/contiv-agent-config", "ConfigMap/contiv-ksr-config", "ConfigMap/contiv-cni-config",
}

// messages are the errors' texts (gomega prints them one per line).
func messages(errs []error) []string {
	out := make([]string, 0, len(errs))
	for _, err := range errs {
		out = append(out, err.Error())
	}
	return out
}

// kube-apiserver accepts every object of `kubectl apply -k k8s/`, and
// kubectl reports each by name.
func TestServerSideDryRun(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	b := render(t)
	var got []string
	for _, o := range b.objects {
		got = append(got, kindName(o))
	}
	g.Expect(got).To(ConsistOf(wantObjects), "objects of kubectl kustomize k8s/")

	env := kubeenv.StartT(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	out, err := env.KubectlCmd(ctx, "apply", "--dry-run=server", "-k", k8sDir()).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	for _, o := range b.objects {
		g.Expect(string(out)).To(ContainSubstring(appliedLine(o)))
	}
}

// kindName is "Kind/name", a generated ConfigMap's name without its hash.
func kindName(o runtime.Object) string {
	name := nameOf(o)
	if o.GetObjectKind().GroupVersionKind().Kind == "ConfigMap" {
		name = name[:max(0, strings.LastIndex(name, "-"))]
	}
	return o.GetObjectKind().GroupVersionKind().Kind + "/" + name
}

// nameOf is the object's name ("<no metadata>" fails the comparisons).
func nameOf(o runtime.Object) string {
	m, err := meta.Accessor(o)
	if err != nil {
		return "<no metadata>"
	}
	return m.GetName()
}

// appliedLine is kubectl's line for a new object: "kind.group/name
// created (server dry run)".
func appliedLine(o runtime.Object) string {
	gvk := o.GetObjectKind().GroupVersionKind()
	kind := strings.ToLower(gvk.Kind)
	if gvk.Group != "" {
		kind += "." + gvk.Group
	}
	return fmt.Sprintf("%s/%s created (server dry run)", kind, nameOf(o))
}
