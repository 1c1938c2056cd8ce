package namespace_test

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/ksr/model/namespace"
)

func TestKey(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	g.Expect(namespace.Key("kube-system")).To(Equal("k8s/namespace/kube-system"))
	g.Expect(namespace.Key("kube-system")).To(HavePrefix(namespace.KeyPrefix))
}

func TestParseKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		key     string
		want    string
		wantErr string
	}{
		{name: "plain", key: "k8s/namespace/kube-system", want: "kube-system"},
		{name: "dotted", key: "k8s/namespace/team-a.prod", want: "team-a.prod"},
		{name: "empty key", key: "", wantErr: `invalid namespace key "": want prefix "k8s/namespace/"`},
		{name: "other resource", key: "k8s/pod/web/namespace/default", wantErr: `invalid namespace key "k8s/pod/web/namespace/default"`},
		{name: "plural", key: "k8s/namespaces/kube-system", wantErr: `want prefix`},
		{name: "absolute", key: "/vnf-agent/contiv-ksr/k8s/namespace/kube-system", wantErr: `want prefix`},
		{name: "empty name", key: "k8s/namespace/", wantErr: `invalid namespace key "k8s/namespace/": empty namespace name`},
		{name: "slash in name", key: "k8s/namespace/a/b", wantErr: `namespace name contains "/"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			name, err := namespace.ParseKey(tc.key)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(namespace.ErrInvalidKey))
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				g.Expect(name).To(BeEmpty())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(name).To(Equal(tc.want))
			g.Expect(namespace.Key(name)).To(Equal(tc.key))
		})
	}
}

// FuzzParseKey: ParseKey never panics, and a key it accepts is rebuilt
// exactly by Key; a name Key can encode parses back.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"k8s/namespace/n1", "k8s/namespace/", "k8s/namespace/a/b", "", "k8s/nod", "n1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if name, err := namespace.ParseKey(s); err == nil {
			if got := namespace.Key(name); got != s {
				t.Fatalf("ParseKey(%q) = %q, Key gives %q", s, name, got)
			}
		}
		if s != "" && !strings.Contains(s, "/") {
			name, err := namespace.ParseKey(namespace.Key(s))
			if err != nil || name != s {
				t.Fatalf("ParseKey(Key(%q)) = %q, %v", s, name, err)
			}
		}
	})
}
