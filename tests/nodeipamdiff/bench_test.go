package nodeipamdiff

import (
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"testing"

	"k8s.io/kubernetes/pkg/controller/nodeipam/ipam/cidrset"

	"github.com/contiv-ipam/agent/plugins/nodeipam"
)

// BenchmarkAllocateRelease measures one AllocateNext and one Release of
// the block it returned, on Kubernetes' cidrset and on ours, in a range
// pre-filled at random (fixed seed, the same blocks on both sides) to 50,
// 90 and 99 %. Releasing the block just handed out keeps the fill and the
// layout as they are while the next-fit cursor walks round the range, so
// both sides scan the same runs of taken blocks: the cost per pair is the
// search from the cursor to the next free block plus the bookkeeping
// (Kubernetes' includes its Prometheus metrics, ours none). Both shapes
// have 2^16 blocks: Kubernetes refuses more than 16 bits for IPv6.
func BenchmarkAllocateRelease(b *testing.B) {
	shapes := []struct {
		name    string
		cluster string
		mask    int
	}{
		{"v4-8-24", "10.0.0.0/8", 24},
		{"v6-48-64", "fd00:1::/48", 64},
	}
	for _, impl := range []string{"k8s-cidrset", "contiv-cidrset"} {
		b.Run(impl, func(b *testing.B) {
			for _, pct := range []int{50, 90, 99} {
				b.Run(strconv.Itoa(pct)+"pct", func(b *testing.B) {
					for _, sh := range shapes {
						b.Run(sh.name, func(b *testing.B) {
							fill := prefill(b, netip.MustParsePrefix(sh.cluster), sh.mask, pct)
							if impl == "k8s-cidrset" {
								benchK8s(b, sh.cluster, sh.mask, fill)
							} else {
								benchOurs(b, sh.cluster, sh.mask, fill)
							}
						})
					}
				})
			}
		})
	}
}

// prefill returns pct % of the blocks of cluster, chosen at random with a
// fixed seed.
func prefill(b *testing.B, cluster netip.Prefix, mask, pct int) []netip.Prefix {
	b.Helper()
	s, err := nodeipam.NewCIDRSet(cluster, mask)
	if err != nil {
		b.Fatal(err)
	}
	n := int(s.Size())
	perm := rand.New(rand.NewPCG(1, 2)).Perm(n)
	out := make([]netip.Prefix, n*pct/100)
	for i := range out {
		out[i] = s.Block(uint64(perm[i]))
	}
	return out
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

func benchK8s(b *testing.B, cluster string, mask int, fill []netip.Prefix) {
	s, err := cidrset.NewCIDRSet(ipNet(netip.MustParsePrefix(cluster)), mask)
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range fill {
		if err := s.Occupy(ipNet(p)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		c, err := s.AllocateNext()
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Release(c); err != nil {
			b.Fatal(err)
		}
	}
}

func benchOurs(b *testing.B, cluster string, mask int, fill []netip.Prefix) {
	s, err := nodeipam.NewCIDRSet(netip.MustParsePrefix(cluster), mask)
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range fill {
		if _, err := s.Occupy(p); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		c, err := s.AllocateNext()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Release(c); err != nil {
			b.Fatal(err)
		}
	}
}
