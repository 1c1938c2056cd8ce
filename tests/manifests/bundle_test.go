package manifests

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/contiv-ipam/agent/tests/kubeenv"
)

// Names of the objects in k8s/.
const (
	namespace    = "kube-system"
	agentName    = "contiv-agent"
	ksrName      = "contiv-ksr"
	capiName     = "contiv-capi-ipam"
	etcdName     = "contiv-etcd"
	installName  = "install-cni"
	etcdPortName = "client"
)

// k8sDir is the kustomization the tests render and apply.
func k8sDir() string { return filepath.Join(kubeenv.RepoRoot(), "k8s") }

// bundle is the output of `kubectl kustomize k8s/`, decoded into typed
// objects. Checks read it; mutation tests change a clone of it.
type bundle struct {
	objects []runtime.Object
	// fixtureErr is set by a mutation helper that found nothing to change.
	fixtureErr error
}

// rendered runs kubectl kustomize once per test binary.
var rendered = sync.OnceValues(func() (*bundle, error) {
	assets, err := kubeenv.AssetsDir()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(assets, "kubectl"), "kustomize", k8sDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("kubectl kustomize %s: %w: %s", k8sDir(), err, stderr.String())
	}
	return decodeBundle(out)
})

// render returns a private copy of the rendered kustomization.
func render(t *testing.T) *bundle {
	t.Helper()
	b, err := rendered()
	if err != nil {
		t.Fatal(err)
	}
	return b.clone()
}

// decodeBundle decodes a multi-document YAML stream of built-in kinds.
func decodeBundle(data []byte) (*bundle, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	b := &bundle{}
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("decode rendered object: %w\n%s", err, doc)
		}
		b.objects = append(b.objects, obj)
	}
}

func (b *bundle) clone() *bundle {
	c := &bundle{objects: make([]runtime.Object, len(b.objects))}
	for i, o := range b.objects {
		c.objects[i] = o.DeepCopyObject()
	}
	return c
}

// find returns the first object of type T named name, or nil.
func find[T interface {
	runtime.Object
	GetName() string
}](b *bundle, name string) T {
	var zero T
	for _, o := range b.objects {
		if v, ok := o.(T); ok && v.GetName() == name {
			return v
		}
	}
	return zero
}

// all returns every object of type T.
func all[T runtime.Object](b *bundle) []T {
	var out []T
	for _, o := range b.objects {
		if v, ok := o.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

func (b *bundle) agent() *appsv1.DaemonSet             { return find[*appsv1.DaemonSet](b, agentName) }
func (b *bundle) ksr() *appsv1.Deployment              { return find[*appsv1.Deployment](b, ksrName) }
func (b *bundle) etcd() *appsv1.StatefulSet            { return find[*appsv1.StatefulSet](b, etcdName) }
func (b *bundle) etcdService() *corev1.Service         { return find[*corev1.Service](b, etcdName) }
func (b *bundle) role() *rbacv1.ClusterRole            { return find[*rbacv1.ClusterRole](b, ksrName) }
func (b *bundle) configMap(n string) *corev1.ConfigMap { return find[*corev1.ConfigMap](b, n) }
func (b *bundle) binding() *rbacv1.ClusterRoleBinding {
	return find[*rbacv1.ClusterRoleBinding](b, ksrName)
}
