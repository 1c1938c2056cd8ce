package e2e

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/contiv-ipam/agent/tests/kubeenv"
)

// The Kubernetes objects of the scenarios, written through the API as a
// kubelet and a node IPAM controller would.

// createNode creates the Node name; podCIDR "" leaves spec.podCIDR unset.
func createNode(t *testing.T, kube *kubeenv.Env, name, podCIDR string) {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if podCIDR != "" {
		n.Spec.PodCIDR, n.Spec.PodCIDRs = podCIDR, []string{podCIDR}
	}
	if _, err := kube.Client.CoreV1().Nodes().Create(t.Context(), n, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create node %s: %v", name, err)
	}
}

// setPodCIDR sets spec.podCIDR of Node name (the API server allows it
// only while it is empty).
func setPodCIDR(ctx context.Context, kube *kubeenv.Env, name, podCIDR string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := kube.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Spec.PodCIDR, n.Spec.PodCIDRs = podCIDR, []string{podCIDR}
		_, err = kube.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

// deleteNode deletes Node name.
func deleteNode(t *testing.T, kube *kubeenv.Env, name string) {
	t.Helper()
	if err := kube.Client.CoreV1().Nodes().Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete node %s: %v", name, err)
	}
}

// createPod creates pod ns/name bound to node and, when ip is not "",
// gives it status.podIP ip through the status subresource; it returns
// the pod's UID.
func createPod(t *testing.T, kube *kubeenv.Env, ns, name, node, ip string) string {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{NodeName: node,
			Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}}},
	}
	created, err := kube.Client.CoreV1().Pods(ns).Create(t.Context(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s/%s: %v", ns, name, err)
	}
	if ip != "" {
		setPodIP(t, kube, ns, name, ip)
	}
	return string(created.UID)
}

// setPodIP sets status.podIP (and podIPs) of pod ns/name with
// UpdateStatus.
func setPodIP(t *testing.T, kube *kubeenv.Env, ns, name, ip string) {
	t.Helper()
	pods := kube.Client.CoreV1().Pods(ns)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := pods.Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		p.Status.PodIP, p.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
		_, err = pods.UpdateStatus(t.Context(), p, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("set the IP of pod %s/%s to %s: %v", ns, name, ip, err)
	}
}

// deletePod deletes pod ns/name at once.
func deletePod(t *testing.T, kube *kubeenv.Env, ns, name string) {
	t.Helper()
	zero := int64(0)
	err := kube.Client.CoreV1().Pods(ns).Delete(t.Context(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if err != nil {
		t.Fatalf("delete pod %s/%s: %v", ns, name, err)
	}
}
