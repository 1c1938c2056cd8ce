package nodeipam

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A cloud value is parsed or refused with the key and the value named;
// never a panic.
func FuzzDecodeCloudValue(f *testing.F) {
	for _, s := range []string{`{"ranges":["10.1.2.0/24","fd00:1::/64"]}`, `{"ranges":[]}`, `{}`, `null`,
		`{"ranges":"10.0.0.0/8"}`, `{"ranges":["10.0.0.0/33"]}`, `[`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, value []byte) {
		got, err := decodeCloudValue("/cloud/n", value)
		if err != nil {
			if !strings.Contains(err.Error(), "/cloud/n") {
				t.Fatalf("error does not name the key: %v", err)
			}
			return
		}
		for _, p := range got {
			if !p.IsValid() {
				t.Fatalf("invalid prefix %v from %q", p, value)
			}
		}
	})
}

// Any pod CIDR strings on a Node are parsed or refused with the node and
// the value named, and a node with unparseable CIDRs never reaches the
// blocks.
func FuzzNodeCIDRs(f *testing.F) {
	f.Add("10.0.0.0/24", "fd00::/64")
	f.Add("10.0.0.0/33", "")
	f.Add("", "")
	f.Add("10.0.0.1", "::/0")
	f.Fuzz(func(t *testing.T, a, b string) {
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: v1.NodeSpec{PodCIDR: a, PodCIDRs: []string{a, b}}}
		_, err := NodeCIDRs(node)
		if err != nil && !strings.Contains(err.Error(), "node n") {
			t.Fatalf("error does not name the node: %v", err)
		}
		book, berr := newBlockBook(testConfig("10.0.0.0/16", "fd00::/56"), NewMetrics())
		if berr != nil {
			t.Fatal(berr)
		}
		if cidrs, err := NodeCIDRs(node); err == nil {
			book.occupy("n", cidrs)
			book.free("n", cidrs)
			for _, s := range book.sets {
				if s.Used() != 0 {
					t.Fatalf("%v: %d blocks left after the free", cidrs, s.Used())
				}
			}
		}
	})
}
