package nodeipam

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedv1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// kube is what the allocators do on the API server: read and patch
// Nodes, emit Events, set the node condition. Safe for concurrent use.
type kube struct {
	client kubernetes.Interface
	rec    record.EventRecorder
	log    *slog.Logger
	stop   func() // stops the event broadcaster, if kube started one
}

// newKube uses rec, or starts an event broadcaster that writes to the API.
func newKube(client kubernetes.Interface, rec record.EventRecorder, log *slog.Logger) *kube {
	k := &kube{client: client, rec: rec, log: log, stop: func() {}}
	if rec == nil {
		b := record.NewBroadcaster()
		b.StartRecordingToSink(&typedv1.EventSinkImpl{Interface: client.CoreV1().Events("")})
		k.rec = b.NewRecorder(scheme.Scheme, v1.EventSource{Component: "contiv-nodeipam"})
		k.stop = b.Shutdown
	}
	return k
}

// node reads a Node from the API.
func (k *kube) node(ctx context.Context, name string) (*v1.Node, error) {
	return k.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
}

// patchCIDRs sets spec.podCIDR and spec.podCIDRs; the API server refuses
// the patch when the node already holds other CIDRs.
func (k *kube) patchCIDRs(ctx context.Context, name string, cidrs []netip.Prefix) (*v1.Node, error) {
	strs := cidrStrings(cidrs)
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"podCIDR": strs[0], "podCIDRs": strs}})
	if err != nil {
		return nil, err
	}
	return k.client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
}

// setCondition sets ConditionPodCIDRAllocated on the node's status.
func (k *kube) setCondition(ctx context.Context, name string, ok bool, reason, msg string) error {
	status := v1.ConditionFalse
	if ok {
		status = v1.ConditionTrue
	}
	now := metav1.Now()
	cond := v1.NodeCondition{Type: ConditionPodCIDRAllocated, Status: status, Reason: reason,
		Message: msg, LastTransitionTime: now, LastHeartbeatTime: now}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []v1.NodeCondition{cond}}})
	if err != nil {
		return err
	}
	_, err = k.client.CoreV1().Nodes().PatchStatus(ctx, name, patch)
	return err
}

// warn emits a Warning event on node and logs it.
func (k *kube) warn(node *v1.Node, reason, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	k.log.Warn(msg, "node", node.Name, "reason", reason)
	k.rec.Event(node, v1.EventTypeWarning, reason, msg)
}

// normal emits a Normal event on node.
func (k *kube) normal(node *v1.Node, reason, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	k.log.Info(msg, "node", node.Name, "reason", reason)
	k.rec.Event(node, v1.EventTypeNormal, reason, msg)
}

// NodeCIDRs returns the node's CIDRs: spec.podCIDRs, else spec.podCIDR.
// The error names the node and the value that is not a CIDR.
func NodeCIDRs(node *v1.Node) ([]netip.Prefix, error) {
	strs := node.Spec.PodCIDRs
	if len(strs) == 0 && node.Spec.PodCIDR != "" {
		strs = []string{node.Spec.PodCIDR}
	}
	out := make([]netip.Prefix, 0, len(strs))
	for i, s := range strs {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("node %s: spec.podCIDRs[%d] %q is not a CIDR", node.Name, i, s)
		}
		out = append(out, p)
	}
	return out, nil
}

func cidrStrings(cidrs []netip.Prefix) []string {
	out := make([]string, len(cidrs))
	for i, c := range cidrs {
		out[i] = c.String()
	}
	return out
}

func parseCIDRs(strs []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, len(strs))
	for i, s := range strs {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR", s)
		}
		out[i] = p
	}
	return out, nil
}
