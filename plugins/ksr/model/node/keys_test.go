package node_test

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/ksr/model/node"
)

func TestKey(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	g.Expect(node.Key("worker-1")).To(Equal("k8s/node/worker-1"))
	g.Expect(node.Key("worker-1")).To(HavePrefix(node.KeyPrefix))
}

func TestParseKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		key     string
		want    string
		wantErr string
	}{
		{name: "plain", key: "k8s/node/worker-1", want: "worker-1"},
		{name: "dotted", key: "k8s/node/ip-10-0-0-1.eu-west-1.compute.internal", want: "ip-10-0-0-1.eu-west-1.compute.internal"},
		{name: "empty key", key: "", wantErr: `invalid node key "": want prefix "k8s/node/"`},
		{name: "other resource", key: "k8s/pod/web/namespace/default", wantErr: `invalid node key "k8s/pod/web/namespace/default"`},
		{name: "nodeconfig", key: "k8s/nodeconfig/worker-1", wantErr: `want prefix`},
		{name: "absolute", key: "/vnf-agent/contiv-ksr/k8s/node/worker-1", wantErr: `want prefix`},
		{name: "empty name", key: "k8s/node/", wantErr: `invalid node key "k8s/node/": empty node name`},
		{name: "slash in name", key: "k8s/node/a/b", wantErr: `node name contains "/"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			name, err := node.ParseKey(tc.key)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(node.ErrInvalidKey))
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				g.Expect(name).To(BeEmpty())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(name).To(Equal(tc.want))
			g.Expect(node.Key(name)).To(Equal(tc.key))
		})
	}
}

// FuzzParseKey: ParseKey never panics, and a key it accepts is rebuilt
// exactly by Key; a name Key can encode parses back.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"k8s/node/n1", "k8s/node/", "k8s/node/a/b", "", "k8s/nod", "n1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if name, err := node.ParseKey(s); err == nil {
			if got := node.Key(name); got != s {
				t.Fatalf("ParseKey(%q) = %q, Key gives %q", s, name, got)
			}
		}
		if s != "" && !strings.Contains(s, "/") {
			name, err := node.ParseKey(node.Key(s))
			if err != nil || name != s {
				t.Fatalf("ParseKey(Key(%q)) = %q, %v", s, name, err)
			}
		}
	})
}
