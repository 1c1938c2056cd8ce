package manifests

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/contiv-ipam/agent/tests/kubeenv"
)

// k8s/capi-ipam renders, deploys the image the Makefile builds (a
// Dockerfile builds it), and a real API server with the Cluster API CRDs
// accepts every object of it.
func TestCAPIProviderManifests(t *testing.T) {
	g := NewWithT(t)
	kube := kubeenv.StartT(t, kubeenv.WithCRDs("plugins/capi/api/crd/capi"))
	dir := filepath.Join(kubeenv.RepoRoot(), "k8s", "capi-ipam")
	var out, stderr bytes.Buffer
	cmd := exec.Command(kube.Kubectl, "kustomize", dir)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	g.Expect(cmd.Run()).To(Succeed(), stderr.String())

	var dep *appsv1.Deployment
	for _, doc := range bytes.Split(out.Bytes(), []byte("\n---\n")) {
		var d appsv1.Deployment
		if yaml.Unmarshal(doc, &d) == nil && d.Kind == "Deployment" {
			dep = &d
		}
	}
	g.Expect(dep).NotTo(BeNil(), "k8s/capi-ipam has a Deployment")
	want := wantImages(t)[capiName]
	g.Expect(dep.Spec.Template.Spec.Containers).To(HaveLen(1))
	g.Expect(dep.Spec.Template.Spec.Containers[0].Image).To(Equal(want), "the Makefile's CAPI_IMAGE")
	_, err := readDockerfile(want)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(dep.Spec.Template.Spec.ServiceAccountName).To(Equal(capiName))

	apply := kube.KubectlCmd(t.Context(), "apply", "-k", dir)
	res, err := apply.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(res))
	g.Expect(string(res)).To(ContainSubstring("deployment.apps/contiv-capi-ipam created"))
	g.Expect(string(res)).To(ContainSubstring("customresourcedefinition.apiextensions.k8s.io/contivippools.ipam.contivpp.io created"))
}
