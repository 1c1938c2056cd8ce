//go:build node

package node

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/contiv-ipam/agent/plugins/ipam"
	"github.com/contiv-ipam/agent/tests/cluster"
)

// pollInterval is how often the waits look.
const pollInterval = 100 * time.Millisecond

// LabelApp labels the pods of the helpers (the pod's or Deployment's
// name).
const LabelApp = "app"

// podSpec is the spec of a busybox pod: PodCommand, no service account
// token (no token controller runs), the local image only, a short grace
// period (PodCommand ends on SIGTERM anyway).
func podSpec() corev1.PodSpec {
	no, grace := false, int64(5)
	return corev1.PodSpec{
		AutomountServiceAccountToken:  &no,
		TerminationGracePeriodSeconds: &grace,
		Containers: []corev1.Container{{Name: "main", Image: BusyboxImage, ImagePullPolicy: corev1.PullNever,
			Command: PodCommand}},
	}
}

// BusyboxPod is a pod of the busybox image for the scheduler to place
// (no nodeName), labelled app=<name>.
func BusyboxPod(namespace, name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{LabelApp: name}},
		Spec: podSpec()}
}

// BusyboxDeployment is a Deployment of replicas busybox pods labelled
// app=<name>.
func BusyboxDeployment(namespace, name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{LabelApp: name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: podSpec()}},
	}
}

// CreatePod creates a pod.
func (n *Node) CreatePod(ctx context.Context, p *corev1.Pod) error {
	_, err := n.Kube.Client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}

// CreateDeployment creates a Deployment.
func (n *Node) CreateDeployment(ctx context.Context, d *appsv1.Deployment) error {
	_, err := n.Kube.Client.AppsV1().Deployments(d.Namespace).Create(ctx, d, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	return nil
}

// DeleteDeployment deletes a Deployment and, through the garbage
// collector, its ReplicaSet and pods (background propagation).
func (n *Node) DeleteDeployment(ctx context.Context, namespace, name string) error {
	bg := metav1.DeletePropagationBackground
	err := n.Kube.Client.AppsV1().Deployments(namespace).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg})
	if err != nil {
		return fmt.Errorf("delete deployment %s/%s: %w", namespace, name, err)
	}
	return nil
}

// DeletePod deletes a pod (its grace period applies: kubelet stops it,
// then the pod object goes).
func (n *Node) DeletePod(ctx context.Context, namespace, name string) error {
	err := n.Kube.Client.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete pod %s/%s: %w", namespace, name, err)
	}
	return nil
}

// Pods lists the pods of namespace with the selector ("app=web"; ""
// for all).
func (n *Node) Pods(ctx context.Context, namespace, selector string) ([]corev1.Pod, error) {
	list, err := n.Kube.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// Running tells whether a pod runs on the node with its address known.
func Running(p corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != ""
}

// WaitPodsRunning waits until count pods of namespace with the selector
// exist and all run with an address (Running), and returns them.
func (n *Node) WaitPodsRunning(ctx context.Context, namespace, selector string, count int, timeout time.Duration) ([]corev1.Pod, error) {
	var last string
	err := poll(ctx, timeout, func() (bool, error) {
		pods, err := n.Pods(ctx, namespace, selector)
		if err != nil {
			return false, err
		}
		running := 0
		var waiting []string
		for _, p := range pods {
			if Running(p) {
				running++
			} else {
				waiting = append(waiting, fmt.Sprintf("%s %s", p.Name, p.Status.Phase))
			}
		}
		last = fmt.Sprintf("%d of %d pods running (%d listed); not yet: %s", running, count, len(pods), strings.Join(waiting, ", "))
		return running == count && len(pods) == count, nil
	})
	if err != nil {
		return nil, fmt.Errorf("pods %s in %s: %w; %s", selector, namespace, err, last)
	}
	return n.Pods(ctx, namespace, selector)
}

// WaitNoPods waits until namespace holds no pod with the selector.
func (n *Node) WaitNoPods(ctx context.Context, namespace, selector string, timeout time.Duration) error {
	var left int
	err := poll(ctx, timeout, func() (bool, error) {
		pods, err := n.Pods(ctx, namespace, selector)
		left = len(pods)
		return err == nil && left == 0, err
	})
	if err != nil {
		return fmt.Errorf("pods %s in %s: %w; %d left", selector, namespace, err, left)
	}
	return nil
}

// NodeReady returns the Node's Ready condition: its status and message.
func (n *Node) NodeReady(ctx context.Context) (bool, string, error) {
	node, err := n.Kube.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	if err != nil {
		return false, "", err
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue, c.Message, nil
		}
	}
	return false, "no Ready condition", nil
}

// WaitReady waits until the Node's Ready condition is want; a Node that
// is not registered yet is not Ready.
func (n *Node) WaitReady(ctx context.Context, want bool, timeout time.Duration) error {
	last := "not registered"
	err := poll(ctx, timeout, func() (bool, error) {
		ready, msg, err := n.NodeReady(ctx)
		if apierrors.IsNotFound(err) {
			return !want, nil
		}
		if err != nil {
			return false, err
		}
		last = fmt.Sprintf("Ready=%t: %s", ready, msg)
		return ready == want, nil
	})
	if err != nil {
		err = fmt.Errorf("node %s Ready=%t: %w; last %s", n.Name, want, err, last)
		if n.Kubelet != nil {
			err = fmt.Errorf("%w; %s", err, tailFile(n.Kubelet.Log(), 10))
		}
	}
	return err
}

// Allocations reads the agent's allocations (GET
// /contiv/v1/ipam/allocations), with every address of a dual-stack one.
func (n *Node) Allocations(ctx context.Context) ([]ipam.PodAllocation, error) {
	var out ipam.Allocations
	err := cluster.GetJSON(ctx, n.Agent.REST+ipam.AllocationsPath, &out)
	return out.Pods, err
}

// AllocatedIPs maps "namespace/name" to the addresses the agent holds for
// the pod (IPs, or MainIP alone), without prefix lengths.
func (n *Node) AllocatedIPs(ctx context.Context) (map[string][]string, error) {
	allocs, err := n.Allocations(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, a := range allocs {
		ips := a.IPs
		if len(ips) == 0 {
			ips = []string{a.MainIP}
		}
		key := a.PodID.Namespace + "/" + a.PodID.Name
		for _, ip := range ips {
			out[key] = append(out[key], strings.Split(ip, "/")[0])
		}
	}
	return out, nil
}

// PodIPs are a pod's status.podIPs (status.podIP alone when podIPs is
// empty).
func PodIPs(p corev1.Pod) []string {
	var out []string
	for _, ip := range p.Status.PodIPs {
		out = append(out, ip.IP)
	}
	if len(out) == 0 && p.Status.PodIP != "" {
		out = []string{p.Status.PodIP}
	}
	return out
}

// ContainerID is the containerd ID of a pod's first container.
func ContainerID(p corev1.Pod) (string, error) {
	for _, st := range p.Status.ContainerStatuses {
		if id, ok := strings.CutPrefix(st.ContainerID, "containerd://"); ok && id != "" {
			return id, nil
		}
	}
	return "", fmt.Errorf("pod %s/%s: no container ID in its status", p.Namespace, p.Name)
}

// Exec runs a command in a pod's first container (crictl exec) and
// returns its output.
func (n *Node) Exec(ctx context.Context, p corev1.Pod, cmd ...string) (string, error) {
	id, err := ContainerID(p)
	if err != nil {
		return "", err
	}
	out, err := n.Containerd.Crictl(ctx, append([]string{"exec", id}, cmd...)...)
	return string(out), err
}

// Ping pings addr once from inside pod p (busybox ping, either family).
func (n *Node) Ping(ctx context.Context, p corev1.Pod, addr string) error {
	out, err := n.Exec(ctx, p, "ping", "-c", "1", "-W", "3", addr)
	if err != nil {
		return fmt.Errorf("ping %s from %s: %w: %s", addr, p.Name, err, out)
	}
	if !strings.Contains(out, "1 packets received") {
		return fmt.Errorf("ping %s from %s: no answer: %s", addr, p.Name, out)
	}
	return nil
}

// poll calls cond every pollInterval until it returns true, timeout
// passes or ctx ends; an error of cond (an API call that failed) is
// reported only if no later call succeeds.
func poll(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	var lastErr error
	for {
		ok, err := cond()
		if err == nil && ok {
			return nil
		}
		lastErr = err
		select {
		case <-ctx.Done():
			if lastErr != nil {
				return fmt.Errorf("not within %s: %w (last error: %v)", timeout, ctx.Err(), lastErr)
			}
			return fmt.Errorf("not within %s: %w", timeout, ctx.Err())
		case <-tick.C:
		}
	}
}
