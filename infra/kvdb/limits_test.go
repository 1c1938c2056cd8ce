package kvdb_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/kvdb"
)

// Values up to etcd's 1.5 MiB request limit (less the key and the
// request's framing) are accepted; one byte more is refused, naming the
// key and both sizes.
func TestValueLimitFollowsEtcdsRequestLimit(t *testing.T) {
	cases := []struct {
		name string
		size int
		ok   bool
	}{
		{"1 MiB + 1", 1<<20 + 1, true},
		{"1.49 MiB", 1_560_000, true},
		{"MaxValueLen", kvdb.MaxValueLen, true},
		{"MaxValueLen + 1", kvdb.MaxValueLen + 1, false},
		{"etcd's request limit", kvdb.EtcdMaxRequestBytes, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := kvdb.CheckPut("k8s/pod/big", make([]byte, tc.size))
			if tc.ok {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(kvdb.ErrValueTooLarge))
			g.Expect(err).To(MatchError(ContainSubstring(`"k8s/pod/big"`)))
		})
	}
	g := NewWithT(t)
	g.Expect(kvdb.MaxValueLen + kvdb.MaxKeyLen).To(BeNumerically("<", kvdb.EtcdMaxRequestBytes))
}
