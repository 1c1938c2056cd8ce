package namekey_test

import (
	"errors"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/ksr/model/internal/namekey"
)

var errInvalid = errors.New("invalid thing key")

func TestParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, key, want, wantErr string
	}{
		{name: "plain", key: "k8s/thing/a-1", want: "a-1"},
		{name: "dotted", key: "k8s/thing/ip-10-0-0-1.compute.internal", want: "ip-10-0-0-1.compute.internal"},
		{name: "empty key", key: "", wantErr: `invalid thing key "": want prefix "k8s/thing/"`},
		{name: "other prefix", key: "k8s/things/a", wantErr: `want prefix`},
		{name: "empty name", key: "k8s/thing/", wantErr: `invalid thing key "k8s/thing/": empty thing name`},
		{name: "slash", key: "k8s/thing/a/b", wantErr: `thing name contains "/"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			name, err := namekey.Parse(tc.key, "k8s/thing/", "thing", errInvalid)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(errInvalid))
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				g.Expect(name).To(BeEmpty())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(name).To(Equal(tc.want))
		})
	}
}

// FuzzParse: Parse never panics, and what it accepts is the key without
// its prefix, non-empty and without "/".
func FuzzParse(f *testing.F) {
	for _, s := range []string{"k8s/thing/n1", "k8s/thing/", "k8s/thing/a/b", "", "n1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		name, err := namekey.Parse(s, "k8s/thing/", "thing", errInvalid)
		if err != nil {
			return
		}
		if name == "" || strings.Contains(name, "/") || "k8s/thing/"+name != s {
			t.Fatalf("Parse(%q) = %q", s, name)
		}
	})
}
