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

// spec.podCIDR is pod_CIDR and spec.podCIDRs, every family in order,
// pod_CIDRs; a node Kubernetes gave no pod CIDR has neither.
func TestNodeModelPodCIDRs(t *testing.T) {
	for _, tc := range []struct {
		name      string
		podCIDR   string
		podCIDRs  []string
		wantCIDRs []string
		wantJSON  string
	}{
		{"dual stack", "10.1.1.0/24", []string{"10.1.1.0/24", "fd00:10:1:1::/64"}, []string{"10.1.1.0/24", "fd00:10:1:1::/64"},
			`"pod_CIDRs":["10.1.1.0/24","fd00:10:1:1::/64"]`},
		{"dual stack, IPv6 first", "fd00:10:1:1::/64", []string{"fd00:10:1:1::/64", "10.1.1.0/24"},
			[]string{"fd00:10:1:1::/64", "10.1.1.0/24"}, `"pod_CIDRs":["fd00:10:1:1::/64","10.1.1.0/24"]`},
		{"single stack", "10.1.1.0/24", []string{"10.1.1.0/24"}, []string{"10.1.1.0/24"},
			`"pod_CIDRs":["10.1.1.0/24"]`},
		{"single stack, podCIDR only (an older API server)", "10.1.1.0/24", nil, nil, `"pod_CIDR":"10.1.1.0/24","provider_ID"`},
		{"none", "", nil, nil, `{"name":"n","provider_ID":"test://n"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			n := testNode("n", tc.podCIDR)
			n.Spec.PodCIDRs = tc.podCIDRs
			m := nodeModel(n)
			g.Expect(m.GetPod_CIDR()).To(Equal(tc.podCIDR))
			g.Expect(m.GetPod_CIDRs()).To(Equal(tc.wantCIDRs))
			b, err := codec.Marshal(m)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(b)).To(ContainSubstring(tc.wantJSON))
			if tc.wantCIDRs == nil {
				g.Expect(string(b)).NotTo(ContainSubstring("pod_CIDRs"))
			}
			back := new(node.Node)
			g.Expect(codec.Unmarshal(b, back)).To(Succeed())
			g.Expect(back.GetPod_CIDRs()).To(Equal(tc.wantCIDRs))
			if tc.podCIDRs != nil {
				n.Spec.PodCIDRs[0] = "changed"
				g.Expect(m.GetPod_CIDRs()[0]).NotTo(Equal("changed"), "the model owns its slice")
			}
		})
	}
}

// status.podIP is ip_address and status.podIPs, every family in order,
// ip_addresses.
func TestPodModelIPAddresses(t *testing.T) {
	for _, tc := range []struct {
		name     string
		podIP    string
		podIPs   []corev1.PodIP
		wantIPs  []string
		wantJSON string
	}{
		{"dual stack", "10.1.1.2", []corev1.PodIP{{IP: "10.1.1.2"}, {IP: "fd00:10:1:1::2"}}, []string{"10.1.1.2", "fd00:10:1:1::2"},
			`"ip_address":"10.1.1.2","host_ip_address":"192.168.16.1"`},
		{"dual stack, IPv6 first", "fd00:10:1:1::2", []corev1.PodIP{{IP: "fd00:10:1:1::2"}, {IP: "10.1.1.2"}},
			[]string{"fd00:10:1:1::2", "10.1.1.2"}, `"ip_addresses":["fd00:10:1:1::2","10.1.1.2"]`},
		{"single stack", "10.1.1.2", []corev1.PodIP{{IP: "10.1.1.2"}}, []string{"10.1.1.2"}, `"ip_addresses":["10.1.1.2"]`},
		{"single stack, podIP only", "10.1.1.2", nil, nil, `"ip_address":"10.1.1.2"`},
		{"no address yet", "", nil, nil, `"host_ip_address":"192.168.16.1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			p := testPod("default", "web", tc.podIP)
			p.Status.PodIPs = tc.podIPs
			m := podModel(p)
			g.Expect(m.GetIpAddress()).To(Equal(tc.podIP))
			g.Expect(m.GetIpAddresses()).To(Equal(tc.wantIPs))
			b, err := codec.Marshal(m)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(b)).To(ContainSubstring(tc.wantJSON))
			if tc.wantIPs == nil {
				g.Expect(string(b)).NotTo(ContainSubstring("ip_addresses"))
			}
			back := new(pod.Pod)
			g.Expect(codec.Unmarshal(b, back)).To(Succeed())
			g.Expect(back.GetIpAddresses()).To(Equal(tc.wantIPs))
		})
	}
}

// The pod's metadata.uid is mirrored as uid: the identity the agents
// match against kubelet's K8S_POD_UID (a pod re-created under the same
// name has another one).
func TestPodUIDIsMirrored(t *testing.T) {
	g := NewWithT(t)
	p := testPod("default", "web", "10.1.1.2")
	p.UID = "6c1b0e2a-0d4b-4f57-9a1e-2f9c5b7d3e10"
	b, err := codec.Marshal(podModel(p))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).To(ContainSubstring(`"uid":"6c1b0e2a-0d4b-4f57-9a1e-2f9c5b7d3e10"`))
	p.UID = ""
	g.Expect(podModel(p).GetUid()).To(BeEmpty())
}
