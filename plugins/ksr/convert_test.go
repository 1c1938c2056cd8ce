package ksr

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	"github.com/contiv-ipam/agent/plugins/ksr/model/node"
	"github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

func TestAddressTypesAndProtocols(t *testing.T) {
	for _, tc := range []struct {
		in   corev1.NodeAddressType
		want node.NodeAddress_NodeAddressType
	}{
		{corev1.NodeHostName, node.NodeAddress_NodeHostName},
		{corev1.NodeExternalIP, node.NodeAddress_NodeExternalIP},
		{corev1.NodeInternalIP, node.NodeAddress_NodeInternalIP},
		{corev1.NodeExternalDNS, node.NodeAddress_NodeExternalDNS},
		{corev1.NodeInternalDNS, node.NodeAddress_NodeInternalDNS},
		{"Other", node.NodeAddress_NodeUnknown},
	} {
		t.Run(string(tc.in), func(t *testing.T) {
			NewWithT(t).Expect(addressType(tc.in)).To(Equal(tc.want))
		})
	}
	g := NewWithT(t)
	g.Expect(protocol("")).To(Equal(pod.Pod_Container_Port_TCP))
	g.Expect(protocol(corev1.ProtocolUDP)).To(Equal(pod.Pod_Container_Port_UDP))
	g.Expect(protocol(corev1.ProtocolSCTP)).To(Equal(pod.Pod_Container_Port_SCTP))
}

// Equal objects encode to equal bytes whatever the order of their maps
// (the mirror compares bytes); a node without kubelet info has none.
func TestEncodingIsDeterministic(t *testing.T) {
	g := NewWithT(t)
	labels := map[string]string{}
	for _, k := range []string{"z", "a", "m", "b", "y", "c"} {
		labels[k] = k + "-value"
	}
	var first []byte
	for range 20 {
		p := testPod("default", "web", "10.1.1.2")
		p.Labels = map[string]string{}
		for k, v := range labels {
			p.Labels[k] = v
		}
		b, err := codec.Marshal(podModel(p))
		g.Expect(err).NotTo(HaveOccurred())
		if first == nil {
			first = b
		}
		g.Expect(b).To(Equal(first))
	}
	g.Expect(string(first)).To(ContainSubstring(`"label":[{"key":"a","value":"a-value"},{"key":"b"`))

	n := nodeModel(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}})
	g.Expect(n.GetNodeInfo()).To(BeNil())
	n = nodeModel(&corev1.Node{Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.36.3", Architecture: "amd64"}}})
	g.Expect(n.GetNodeInfo().GetKubeletVersion()).To(Equal("v1.36.3"))
	g.Expect(n.GetNodeInfo().GetArchitecture()).To(Equal("amd64"))
	g.Expect(contivAnnotations(map[string]string{"other.io/x": "1"})).To(BeNil())
}
