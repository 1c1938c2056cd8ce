package codec_test

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	"github.com/contiv-ipam/agent/plugins/ksr/model/node"
	"github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
)

func sampleNode() *node.Node {
	return &node.Node{
		Name:        "n1",
		Pod_CIDR:    "10.1.2.0/24",
		Provider_ID: "aws:///eu-west-1a/i-0abc",
		Addresses: []*node.NodeAddress{
			{Type: node.NodeAddress_NodeInternalIP, Address: "192.168.16.1"},
			{Type: node.NodeAddress_NodeInternalIP, Address: "fd00::1"},
			{Type: node.NodeAddress_NodeHostName, Address: "n1"},
		},
		NodeInfo: &node.NodeSystemInfo{
			Machine_ID:              "m",
			System_UUID:             "u",
			Boot_ID:                 "b",
			KernelVersion:           "6.1.0",
			OsImage:                 "Debian GNU/Linux 12",
			ContainerRuntimeVersion: "containerd://1.7",
			KubeletVersion:          "v1.31.0",
			KubeProxyVersion:        "v1.31.0",
			OperatingSystem:         "linux",
			Architecture:            "amd64",
		},
	}
}

func samplePod() *pod.Pod {
	return &pod.Pod{
		Name:          "web-0",
		Namespace:     "default",
		Label:         []*pod.Pod_Label{{Key: "app", Value: "web"}},
		IpAddress:     "10.1.2.5",
		HostIpAddress: "192.168.16.1",
		Container: []*pod.Pod_Container{{
			Name: "nginx",
			Port: []*pod.Pod_Container_Port{
				{Name: "http", ContainerPort: 80, Protocol: pod.Pod_Container_Port_TCP},
				{Name: "dns", HostPort: 5353, ContainerPort: 53, Protocol: pod.Pod_Container_Port_UDP, HostIpAddress: "fd00::1"},
			},
		}},
		Labels:      map[string]string{"app": "web", "tier": "front"},
		Annotations: map[string]string{"note": "ünïcode \"quoted\""},
	}
}

func sampleVppNode() *vppnode.VppNode {
	return &vppnode.VppNode{
		Id:          7,
		Name:        "n1",
		IpAddress:   "192.168.16.7/24",
		IpAddresses: []string{"192.168.16.7/24", "fd00::7/64"},
	}
}

func sampleStruct(t *testing.T) *structpb.Struct {
	s, err := structpb.NewStruct(map[string]any{
		"name": "ns1", "labels": map[string]any{"a": "b"}, "n": 3.0, "ok": true, "list": []any{"x", 1.0},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   proto.Message
	}{
		{"node", sampleNode()},
		{"pod", samplePod()},
		{"vppnode", sampleVppNode()},
		{"struct", sampleStruct(t)},
		{"empty node", &node.Node{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			data, err := codec.Marshal(tc.in)
			g.Expect(err).NotTo(HaveOccurred())
			out := tc.in.ProtoReflect().New().Interface()
			g.Expect(codec.Unmarshal(data, out)).To(Succeed())
			g.Expect(proto.Equal(tc.in, out)).To(BeTrue(), "decoded %v from %s", out, data)

			again, err := codec.Marshal(out)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(again).To(Equal(data), "equal messages give equal bytes")
		})
	}
}

func TestMarshalUsesProtoNames(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)

	data, err := codec.Marshal(sampleNode())
	g.Expect(err).NotTo(HaveOccurred())
	s := string(data)
	g.Expect(s).To(ContainSubstring(`"pod_CIDR":"10.1.2.0/24"`))
	g.Expect(s).To(ContainSubstring(`"provider_ID"`))
	g.Expect(s).To(ContainSubstring(`"node_info":{`))
	g.Expect(s).To(ContainSubstring(`"type":"NodeInternalIP"`))
	g.Expect(s).NotTo(ContainSubstring(`podCIDR`))

	data, err = codec.Marshal(samplePod())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(data)).To(ContainSubstring(`"host_ip_address":"192.168.16.1"`))
	g.Expect(string(data)).To(ContainSubstring(`"ip_address":"10.1.2.5"`))
	p := samplePod()
	p.IpAddresses = []string{"10.1.2.5", "fd00:10:1:2::5"}
	data, err = codec.Marshal(p)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(data)).To(ContainSubstring(`"ip_addresses":["10.1.2.5","fd00:10:1:2::5"]`))
	n := sampleNode()
	n.Pod_CIDRs = []string{"10.1.2.0/24", "fd00:10:1:2::/64"}
	data, err = codec.Marshal(n)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(data)).To(ContainSubstring(`"pod_CIDRs":["10.1.2.0/24","fd00:10:1:2::/64"]`))

	data, err = codec.Marshal(sampleVppNode())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(data)).To(Equal(
		`{"id":7,"name":"n1","ip_address":"192.168.16.7/24","ip_addresses":["192.168.16.7/24","fd00::7/64"]}`))
}

func TestMarshalLeavesOutZeroFields(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)

	data, err := codec.Marshal(&vppnode.VppNode{Id: 1, Name: "n1"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(data)).To(Equal(`{"id":1,"name":"n1"}`))

	data, err = codec.Marshal(&node.Node{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(data)).To(Equal(`{}`))
}

func TestUnmarshalSpecNamesAndUnknownFields(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)

	in := `{"name":"n1","pod_CIDR":"10.1.2.0/24","addresses":[{"type":"NodeInternalIP","address":"192.168.16.1"}],"extra":1,
	        "node_info":{"kernel_version":"6.1","more":{"nested":[1,2]}}}`
	var n node.Node
	g.Expect(codec.Unmarshal([]byte(in), &n)).To(Succeed())
	g.Expect(proto.Equal(&n, &node.Node{
		Name:      "n1",
		Pod_CIDR:  "10.1.2.0/24",
		Addresses: []*node.NodeAddress{{Type: node.NodeAddress_NodeInternalIP, Address: "192.168.16.1"}},
		NodeInfo:  &node.NodeSystemInfo{KernelVersion: "6.1"},
	})).To(BeTrue(), "got %v", &n)

	var p pod.Pod
	g.Expect(codec.Unmarshal([]byte(`{"name":"web-0","namespace":"default","ip_address":"10.1.2.5",
		"host_ip_address":"192.168.16.1","container":[{"name":"c","port":[{"container_port":80,"protocol":"UDP"}]}],
		"labels":{"app":"web"},"status":{"phase":"Running"}}`), &p)).To(Succeed())
	g.Expect(p.GetIpAddress()).To(Equal("10.1.2.5"))
	g.Expect(p.GetHostIpAddress()).To(Equal("192.168.16.1"))
	g.Expect(p.GetContainer()[0].GetPort()[0].GetProtocol()).To(Equal(pod.Pod_Container_Port_UDP))
	g.Expect(p.GetLabels()).To(Equal(map[string]string{"app": "web"}))

	var v vppnode.VppNode
	g.Expect(codec.Unmarshal([]byte(`{"id":3,"name":"n3","ip_address":"10.0.0.3/24","ip_addresses":["10.0.0.3/24"],"mac":"x"}`), &v)).To(Succeed())
	g.Expect(proto.Equal(&v, &vppnode.VppNode{Id: 3, Name: "n3", IpAddress: "10.0.0.3/24", IpAddresses: []string{"10.0.0.3/24"}})).To(BeTrue())
}

func TestUnmarshalUnknownEnumName(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)

	// DiscardUnknown also skips enum names this build does not know (a
	// newer writer's address type): the field keeps its zero value.
	var n node.Node
	g.Expect(codec.Unmarshal([]byte(`{"addresses":[{"type":"NodeFutureKind","address":"a"},{"type":3,"address":"b"}]}`), &n)).To(Succeed())
	g.Expect(n.GetAddresses()).To(HaveLen(2))
	g.Expect(n.GetAddresses()[0].GetType()).To(Equal(node.NodeAddress_NodeUnknown))
	g.Expect(n.GetAddresses()[1].GetType()).To(Equal(node.NodeAddress_NodeInternalIP))
}

func TestUnmarshalLowerCamelCase(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)

	var n node.Node
	g.Expect(codec.Unmarshal([]byte(`{"name":"n1","podCIDR":"10.1.2.0/24","podCIDRs":["10.1.2.0/24","fd00:10:1:2::/64"],`+
		`"providerID":"p","nodeInfo":{"machineID":"m","kubeletVersion":"v1"}}`), &n)).To(Succeed())
	g.Expect(n.GetPod_CIDR()).To(Equal("10.1.2.0/24"))
	g.Expect(n.GetPod_CIDRs()).To(Equal([]string{"10.1.2.0/24", "fd00:10:1:2::/64"}))
	g.Expect(n.GetProvider_ID()).To(Equal("p"))
	g.Expect(n.GetNodeInfo().GetMachine_ID()).To(Equal("m"))
	g.Expect(n.GetNodeInfo().GetKubeletVersion()).To(Equal("v1"))

	var p pod.Pod
	g.Expect(codec.Unmarshal([]byte(`{"ipAddress":"10.1.2.5","ipAddresses":["10.1.2.5","fd00:10:1:2::5"],"hostIpAddress":"192.168.16.1",`+
		`"container":[{"port":[{"hostPort":8080,"containerPort":80}]}]}`), &p)).To(Succeed())
	g.Expect(p.GetIpAddress()).To(Equal("10.1.2.5"))
	g.Expect(p.GetIpAddresses()).To(Equal([]string{"10.1.2.5", "fd00:10:1:2::5"}))
	g.Expect(p.GetHostIpAddress()).To(Equal("192.168.16.1"))
	g.Expect(p.GetContainer()[0].GetPort()[0].GetHostPort()).To(Equal(int32(8080)))

	var v vppnode.VppNode
	g.Expect(codec.Unmarshal([]byte(`{"id":2,"ipAddresses":["10.0.0.2/24"]}`), &v)).To(Succeed())
	g.Expect(v.GetIpAddresses()).To(Equal([]string{"10.0.0.2/24"}))
}

func TestUnmarshalReplacesContents(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)

	n := sampleNode()
	g.Expect(codec.Unmarshal([]byte(`{"name":"other"}`), n)).To(Succeed())
	g.Expect(proto.Equal(n, &node.Node{Name: "other"})).To(BeTrue())
}

func TestUnmarshalErrors(t *testing.T) {
	t.Parallel()
	long := `{"name":"` + strings.Repeat("x", 200) + `"` // unterminated object
	tests := []struct {
		name string
		data string
		into proto.Message
		want []string
	}{
		{"empty", ``, &node.Node{}, []string{"codec: unmarshal ksr.node.Node from \"\""}},
		{"not json", `nope`, &pod.Pod{}, []string{"ksr.pod.Pod", `"nope"`}},
		{"wrong type", `{"id":"seven"}`, &vppnode.VppNode{}, []string{"nodesync.vppnode.VppNode", `seven`}},
		{"negative id", `{"id":-1}`, &vppnode.VppNode{}, []string{"nodesync.vppnode.VppNode"}},
		{"enum number not a string", `{"addresses":[{"type":true}]}`, &node.Node{}, []string{"ksr.node.Node"}},
		{"struct not object", `[1,2]`, &structpb.Struct{}, []string{"google.protobuf.Struct", `"[1,2]"`}},
		{"long excerpt cut", long, &node.Node{}, []string{`"{\"name\":\"` + strings.Repeat("x", 55) + `"...`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			err := codec.Unmarshal([]byte(tc.data), tc.into)
			g.Expect(err).To(HaveOccurred())
			for _, w := range tc.want {
				g.Expect(err.Error()).To(ContainSubstring(w))
			}
			g.Expect(err.Error()).NotTo(ContainSubstring(strings.Repeat("x", 65)), "excerpt is at most 64 bytes")
		})
	}
}

func TestUnmarshalNilMessage(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)

	var n *node.Node
	err := codec.Unmarshal([]byte(`{}`), n)
	g.Expect(err).To(MatchError(ContainSubstring("codec: unmarshal ksr.node.Node: nil message")))
	g.Expect(codec.Unmarshal([]byte(`{}`), nil)).To(MatchError(ContainSubstring("<nil>")))
}

// FuzzUnmarshal decodes arbitrary bytes into every model: it must never
// panic, and whatever decodes must re-encode and decode to an equal message.
func FuzzUnmarshal(f *testing.F) {
	for _, m := range []proto.Message{sampleNode(), samplePod(), sampleVppNode()} {
		data, err := codec.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"name":"n1","podCIDR":"10.1.2.0/24","extra":{"a":[1,{"b":null}]}}`))
	f.Add([]byte(`{"id":4294967295,"ipAddresses":[]}`))
	f.Add([]byte(`{"labels":{"a":"b"},"annotations":null,"container":[{"port":[{"protocol":2}]}]}`))
	f.Add([]byte(`{"a":1e308,"b":"\u00e9","c":[true,false,null]}`))
	f.Add([]byte(`[`))
	f.Add([]byte{})

	newMessages := []func() proto.Message{
		func() proto.Message { return new(node.Node) },
		func() proto.Message { return new(pod.Pod) },
		func() proto.Message { return new(vppnode.VppNode) },
		func() proto.Message { return new(structpb.Struct) },
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, newMessage := range newMessages {
			m := newMessage()
			if err := codec.Unmarshal(data, m); err != nil {
				continue
			}
			out, err := codec.Marshal(m)
			if err != nil {
				t.Fatalf("decoded %T from %q but cannot encode it: %v", m, data, err)
			}
			again := newMessage()
			if err := codec.Unmarshal(out, again); err != nil {
				t.Fatalf("cannot decode own output %q: %v", out, err)
			}
			if !proto.Equal(m, again) {
				t.Fatalf("round trip changed %v into %v", m, again)
			}
		}
	})
}
