package pod_test

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

func TestKey(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	g.Expect(pod.Key("web-0", "default")).To(Equal("k8s/pod/web-0/namespace/default"))
	g.Expect(pod.Key("web-0", "default")).To(HavePrefix(pod.KeyPrefix))
}

func TestParseKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		key           string
		wantName      string
		wantNamespace string
		wantErr       string
	}{
		{name: "plain", key: "k8s/pod/web-0/namespace/default", wantName: "web-0", wantNamespace: "default"},
		{name: "pod called namespace", key: "k8s/pod/namespace/namespace/namespace", wantName: "namespace", wantNamespace: "namespace"},
		{name: "empty key", key: "", wantErr: `invalid pod key "": want prefix "k8s/pod/"`},
		{name: "node key", key: "k8s/node/n1", wantErr: `want prefix`},
		{name: "no namespace part", key: "k8s/pod/web-0", wantErr: `invalid pod key "k8s/pod/web-0": want "k8s/pod/<name>/namespace/<namespace>"`},
		{name: "wrong tag", key: "k8s/pod/web-0/ns/default", wantErr: `want "k8s/pod/<name>/namespace/<namespace>"`},
		{name: "extra part", key: "k8s/pod/web-0/namespace/default/x", wantErr: `want "k8s/pod/<name>/namespace/<namespace>"`},
		{name: "empty name", key: "k8s/pod//namespace/default", wantErr: `empty pod name`},
		{name: "empty namespace", key: "k8s/pod/web-0/namespace/", wantErr: `empty namespace`},
		{name: "absolute", key: "/vnf-agent/contiv-ksr/k8s/pod/web-0/namespace/default", wantErr: `want prefix`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			name, namespace, err := pod.ParseKey(tc.key)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(pod.ErrInvalidKey))
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				g.Expect(name).To(BeEmpty())
				g.Expect(namespace).To(BeEmpty())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(name).To(Equal(tc.wantName))
			g.Expect(namespace).To(Equal(tc.wantNamespace))
			g.Expect(pod.Key(name, namespace)).To(Equal(tc.key))
		})
	}
}

// FuzzParseKey: ParseKey never panics, a key it accepts is rebuilt exactly
// by Key, and names Key can encode parse back.
func FuzzParseKey(f *testing.F) {
	f.Add("k8s/pod/web-0/namespace/default", "web-0", "default")
	f.Add("k8s/pod//namespace/", "", "")
	f.Add("k8s/pod/a/namespace/b/c", "a/b", "c")
	f.Add("", "namespace", "namespace")
	f.Fuzz(func(t *testing.T, key, name, namespace string) {
		if n, ns, err := pod.ParseKey(key); err == nil {
			if got := pod.Key(n, ns); got != key {
				t.Fatalf("ParseKey(%q) = %q, %q; Key gives %q", key, n, ns, got)
			}
		}
		if name != "" && namespace != "" && !strings.Contains(name+namespace, "/") {
			n, ns, err := pod.ParseKey(pod.Key(name, namespace))
			if err != nil || n != name || ns != namespace {
				t.Fatalf("ParseKey(Key(%q, %q)) = %q, %q, %v", name, namespace, n, ns, err)
			}
		}
	})
}

func TestNodeKey(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	g.Expect(pod.NodeKey("n1", "web-0", "default")).To(Equal("k8s/node-pods/n1/web-0/namespace/default"))
	g.Expect(pod.NodeKey("n1", "web-0", "default")).To(HavePrefix(pod.NodePrefix("n1")))
	g.Expect(pod.NodeKey("n1x", "web-0", "default")).NotTo(HavePrefix(pod.NodePrefix("n1")), "node n1 must not see n1x's pods")
	g.Expect(pod.NodePrefix("n1")).To(HavePrefix(pod.NodeKeyPrefix))
	g.Expect(pod.NodeKeyPrefix).NotTo(HavePrefix(pod.KeyPrefix), "the two layouts are disjoint")
}

func TestParseNodeKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, key                  string
		wantNode, wantName, wantNS string
		wantErr                    string
	}{
		{name: "plain", key: "k8s/node-pods/n1/web-0/namespace/default", wantNode: "n1", wantName: "web-0", wantNS: "default"},
		{name: "cluster layout", key: "k8s/pod/web-0/namespace/default", wantErr: `want prefix "k8s/node-pods/"`},
		{name: "no node", key: "k8s/node-pods/web-0/namespace/default", wantErr: `want "k8s/node-pods/<node>/<name>/namespace/<namespace>"`},
		{name: "wrong tag", key: "k8s/node-pods/n1/web-0/ns/default", wantErr: `want "k8s/node-pods/<node>`},
		{name: "extra part", key: "k8s/node-pods/n1/web-0/namespace/default/x", wantErr: `want "k8s/node-pods/<node>`},
		{name: "empty node", key: "k8s/node-pods//web-0/namespace/default", wantErr: `empty node name`},
		{name: "empty name", key: "k8s/node-pods/n1//namespace/default", wantErr: `empty pod name`},
		{name: "empty namespace", key: "k8s/node-pods/n1/web-0/namespace/", wantErr: `empty namespace`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			n, name, ns, err := pod.ParseNodeKey(tc.key)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(pod.ErrInvalidKey))
				g.Expect(err.Error()).To(ContainSubstring(tc.wantErr))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect([]string{n, name, ns}).To(Equal([]string{tc.wantNode, tc.wantName, tc.wantNS}))
			g.Expect(pod.NodeKey(n, name, ns)).To(Equal(tc.key))
			_, name2, ns2, err := pod.ParseAnyKey(tc.key)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect([]string{name2, ns2}).To(Equal([]string{name, ns}))
		})
	}
}

func TestParseAnyKeyReadsTheClusterLayout(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	n, name, ns, err := pod.ParseAnyKey(pod.Key("web-0", "default"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect([]string{n, name, ns}).To(Equal([]string{"", "web-0", "default"}))
	_, _, _, err = pod.ParseAnyKey("k8s/node/n1")
	g.Expect(err).To(MatchError(pod.ErrInvalidKey))
}

func FuzzParseNodeKey(f *testing.F) {
	f.Add("k8s/node-pods/n1/web-0/namespace/default")
	f.Add("k8s/node-pods//x/namespace/")
	f.Fuzz(func(t *testing.T, key string) {
		n, name, ns, err := pod.ParseNodeKey(key)
		if err == nil && pod.NodeKey(n, name, ns) != key {
			t.Fatalf("ParseNodeKey(%q) = %q %q %q, which NodeKey builds as %q", key, n, name, ns, pod.NodeKey(n, name, ns))
		}
	})
}
