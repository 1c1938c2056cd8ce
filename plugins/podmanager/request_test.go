package podmanager

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestCheckNames(t *testing.T) {
	ok := AttachmentKey{Network: "k8s-pod-network", ContainerID: "0a1b_c.d-e", IfName: "eth0"}
	cases := []struct {
		name   string
		change func(k *AttachmentKey)
		want   string // "" = valid
	}{
		{"valid", func(*AttachmentKey) {}, ""},
		{"15-byte interface", func(k *AttachmentKey) { k.IfName = "abcdefghijklmno" }, ""},
		{"container with a slash", func(k *AttachmentKey) { k.ContainerID = "a/b" }, `container_id "a/b"`},
		{"container starting with a dot", func(k *AttachmentKey) { k.ContainerID = ".a" }, `container_id ".a"`},
		{"network with a space", func(k *AttachmentKey) { k.Network = "my net" }, `network_name "my net"`},
		{"16-byte interface", func(k *AttachmentKey) { k.IfName = "abcdefghijklmnop" }, `interface_name "abcdefghijklmnop"`},
		{"interface with a colon", func(k *AttachmentKey) { k.IfName = "eth0:1" }, `interface_name "eth0:1"`},
		{"interface with a slash", func(k *AttachmentKey) { k.IfName = "a/b" }, `interface_name "a/b"`},
		{"interface with a tab", func(k *AttachmentKey) { k.IfName = "a\tb" }, `interface_name "a\tb"`},
		{"interface dot-dot", func(k *AttachmentKey) { k.IfName = ".." }, `interface_name ".."`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			k := ok
			tc.change(&k)
			err := checkNames(k)
			if tc.want == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ErrBadRequest))
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
		})
	}
}

func TestParseArgs(t *testing.T) {
	cases := []struct {
		name string
		args string
		pod  string // namespace/name; "" = error
		want string
	}{
		{"none", "", podmanagerContainer("c1"), ""},
		{"only unknown keys", "IgnoreUnknown=1;FOO=bar", podmanagerContainer("c1"), ""},
		{"both", "K8S_POD_NAMESPACE=default;K8S_POD_NAME=web", "default/web", ""},
		{"trailing separator", "K8S_POD_NAMESPACE=default;K8S_POD_NAME=web;", "default/web", ""},
		{"value with =", "K8S_POD_NAMESPACE=default;K8S_POD_NAME=web;X=a=b", "default/web", ""},
		{"last wins", "K8S_POD_NAMESPACE=a;K8S_POD_NAME=web;K8S_POD_NAMESPACE=b", "b/web", ""},
		{"no =", "K8S_POD_NAME", "", `"K8S_POD_NAME" is not KEY=VALUE`},
		{"empty name", "K8S_POD_NAMESPACE=default;K8S_POD_NAME=", "", "without K8S_POD_NAME"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			id, err := podID(tc.args, "c1")
			if tc.want != "" {
				g.Expect(err).To(MatchError(ErrBadRequest))
				g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(id.String()).To(Equal(tc.pod))
		})
	}
}

func podmanagerContainer(c string) string { return ContainerNamespace + "/" + c }

// K8S_POD_UID is the pod's identity: taken as given, absent is "", and a
// value with white space, control characters or over MaxPodUID bytes is
// refused naming the key.
func TestParsePodUID(t *testing.T) {
	cases := []struct {
		name, args, uid, err string
	}{
		{"absent", "K8S_POD_NAMESPACE=default;K8S_POD_NAME=web", "", ""},
		{"kubelet's", "K8S_POD_NAMESPACE=default;K8S_POD_NAME=web;K8S_POD_UID=0f5e6a1c-3b9d-4c1e-9a57-000000000001", "0f5e6a1c-3b9d-4c1e-9a57-000000000001", ""},
		{"space", "K8S_POD_UID=a b", "", "K8S_POD_UID"},
		{"control", "K8S_POD_UID=a\x01", "", "K8S_POD_UID"},
		{"too long", "K8S_POD_UID=" + strings.Repeat("u", MaxPodUID+1), "", "at most 128"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			uid, err := podUID(tc.args)
			if tc.err != "" {
				g.Expect(err).To(MatchError(ErrBadRequest))
				g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(uid).To(Equal(tc.uid))
		})
	}
}
