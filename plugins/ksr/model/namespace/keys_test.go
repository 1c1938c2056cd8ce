package namespace_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/ksr/model/namespace"
)

// The parser is shared with the node keys (internal/namekey, tested
// there); this checks the namespace wiring: prefix, wording, sentinel.
func TestKeys(t *testing.T) {
	g := NewWithT(t)
	g.Expect(namespace.Key("kube-system")).To(Equal("k8s/namespace/kube-system"))
	name, err := namespace.ParseKey("k8s/namespace/kube-system")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(name).To(Equal("kube-system"))
	_, err = namespace.ParseKey("k8s/namespace/")
	g.Expect(err).To(MatchError(namespace.ErrInvalidKey))
	g.Expect(err).To(MatchError(ContainSubstring(`invalid namespace key "k8s/namespace/": empty namespace name`)))
	_, err = namespace.ParseKey("k8s/node/n1")
	g.Expect(err).To(MatchError(ContainSubstring(`want prefix "k8s/namespace/"`)))
}
