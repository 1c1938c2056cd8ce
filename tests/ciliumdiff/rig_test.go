package ciliumdiff

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/cilium/pkg/ipam/service/allocator"
	"github.com/cilium/cilium/pkg/ipam/service/ipallocator"

	"github.com/contiv-ipam/agent/engine/ipalloc"
	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/infra/kvdb/bolt"
	"github.com/contiv-ipam/agent/infra/servicelabel"
	"github.com/contiv-ipam/agent/plugins/contivconf"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ipam"
	"github.com/contiv-ipam/agent/plugins/nodesync"
)

// --- our side --------------------------------------------------------------

// dualStack is the contiv.conf of every test but the /64 one: node 1
// gets 10.1.0.16/28 and fd00:10:1::10/124, 12 addresses each to hand out.
const dualStack = `
ipamConfig:
  podSubnetCIDR: 10.1.0.0/16
  podSubnetOneNodePrefixLen: 28
  vppHostSubnetCIDR: 172.30.0.0/16
  vppHostSubnetOneNodePrefixLen: 24
  vxlanCIDR: 192.168.30.0/24
  dualStack:
    podSubnetCIDR: fd00:10:1::/48
    podSubnetOneNodePrefixLen: 124
    vppHostSubnetCIDR: fd00:30::/48
    vppHostSubnetOneNodePrefixLen: 120
    vxlanCIDR: fd00:17::/64
    serviceCIDR: fd00:96::/112
`

// The pod subnets of node 1 under dualStack (newOurs checks the IPv4 one
// with PodSubnetThisNode and both with the status line of Dump).
var (
	podV4 = netip.MustParsePrefix("10.1.0.16/28")
	podV6 = netip.MustParsePrefix("fd00:10:1::10/124")
)

const thisNode = "node1"

// label names this node.
type label struct{}

func (label) GetAgentLabel() string  { return thisNode }
func (label) GetAgentPrefix() string { return servicelabel.AllAgentsPrefix + thisNode + "/" }
func (label) GetDifferentAgentPrefix(l string) string {
	return servicelabel.AllAgentsPrefix + l + "/"
}
func (label) GetAllAgentsPrefix() string { return servicelabel.AllAgentsPrefix }

// nodeSync gives this node ID 1 and knows no other node.
type nodeSync struct{}

func (nodeSync) GetNodeID() uint32                                                  { return 1 }
func (nodeSync) GetAllNodes() nodesync.Nodes                                        { return nodesync.Nodes{} }
func (nodeSync) PublishNodeIPs([]*nodesync.IPWithNetwork, nodesync.IPVersion) error { return nil }

var (
	_ servicelabel.ReaderAPI = label{}
	_ nodesync.API           = nodeSync{}
)

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// storage selects the LocalDB of our plugin.
type storage int

const (
	inMemory storage = iota // LocalDB nil: the random sequences, thousands of calls
	onBolt                  // a real bolt file in t.TempDir(): every call is fsync'ed
)

// newOurs starts the IPAM plugin on node 1 with the contiv.conf yaml and
// runs its first resync with no Kubernetes state; Close runs at cleanup.
func newOurs(t testing.TB, yaml string, st storage) *ipam.Plugin {
	t.Helper()
	cfg := contivconf.DefaultConfig()
	if err := config.Decode([]byte(yaml), &cfg, "test contiv.conf"); err != nil {
		t.Fatalf("contiv.conf: %v", err)
	}
	conf := contivconf.NewPlugin(contivconf.UseConf(cfg), contivconf.UseDeps(func(d *contivconf.Deps) {
		d.Log, d.ServiceLabel = discard(), label{}
	}))
	if err := conf.Init(); err != nil {
		t.Fatalf("contivconf Init: %v", err)
	}
	var db kvdb.Broker
	if st == onBolt {
		c := bolt.DefaultConfig()
		c.DBPath = filepath.Join(t.TempDir(), "ipam.db")
		b := bolt.NewPlugin(bolt.UseConf(c), bolt.UseDeps(func(d *bolt.Deps) { d.Cfg, d.Log = config.NoFile, discard() }))
		if err := b.Init(); err != nil {
			t.Fatalf("bolt Init: %v", err)
		}
		t.Cleanup(func() {
			if err := b.Close(); err != nil {
				t.Errorf("bolt Close: %v", err)
			}
		})
		db = b
	}
	// No address cooldown (D8): a released address is free at once, as in
	// Cilium.
	ipamConf := ipam.DefaultConfig()
	ipamConf.AddressCooldown = 0
	p := ipam.NewPlugin(ipam.UseConf(ipamConf), ipam.UseDeps(func(d *ipam.Deps) {
		d.Log, d.ContivConf, d.NodeSync, d.ServiceLabel, d.LocalDB = discard(), conf, nodeSync{}, label{}, db
	}))
	if err := p.Init(); err != nil {
		t.Fatalf("ipam Init: %v", err)
	}
	// Registered after bolt's Close, so it runs before it.
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("ipam Close: %v", err)
		}
	})
	if err := p.AfterInit(); err != nil {
		t.Fatalf("ipam AfterInit: %v", err)
	}
	ks := api.KubeStateData{}
	if err := p.Resync(&api.DBResync{KubeState: ks}, ks, 1, nil); err != nil {
		t.Fatalf("ipam Resync: %v", err)
	}
	return p
}

// checkSubnets fails the test unless our plugin runs on the pod subnets
// v4 and v6 (either may be invalid: that family is not checked).
func checkSubnets(t testing.TB, p *ipam.Plugin, v4, v6 netip.Prefix) {
	t.Helper()
	if v4.IsValid() {
		if got := p.PodSubnetThisNode(); got == nil || got.String() != v4.String() {
			t.Fatalf("PodSubnetThisNode is %v, the test expects %s", got, v4)
		}
	}
	_, _, status := p.Dump()
	for _, want := range []netip.Prefix{v4, v6} {
		if want.IsValid() && !strings.Contains(status, want.String()+":") {
			t.Fatalf("Dump's status %q does not name the pod subnet %s the test expects", status, want)
		}
	}
}

// --- Cilium's side ---------------------------------------------------------

// ciliumFamily is one family of Cilium's host-scope IPAM: the
// ipallocator.Range that hostScopeAllocator (pkg/ipam/hostscope.go) wraps,
// built by ipallocator.NewCIDRRange as newHostScopeAllocator builds it.
//
// NewCIDRRange backs the Range with allocator.NewAllocationMap, whose
// AllocateNext starts at a random offset. v1.20.2 has no constructor of a
// Range over another map, so allocateNext makes the choice with
// allocator.NewContiguousAllocationMap (first fit) restored from the
// Range's own snapshot, and then allocates that address in the Range.
// Everything else is the Range's code.
type ciliumFamily struct {
	prefix netip.Prefix
	rng    *ipallocator.Range
	first  *allocator.AllocationBitmap
}

func newCiliumFamily(prefix netip.Prefix) *ciliumFamily {
	rng := ipallocator.NewCIDRRange(prefix)
	// Free is the Range's max before anything is allocated.
	return &ciliumFamily{prefix: prefix.Masked(), rng: rng,
		first: allocator.NewContiguousAllocationMap(rng.Free(), prefix.Masked().String())}
}

// allocateNext is Range.AllocateNext with the contiguous scan strategy:
// the lowest free address, ErrFull when there is none.
func (f *ciliumFamily) allocateNext() (netip.Addr, error) {
	_, bits, err := f.rng.Snapshot()
	if err != nil {
		return netip.Addr{}, err
	}
	if err := f.first.Restore(f.prefix.String(), bits); err != nil {
		return netip.Addr{}, err
	}
	off, ok := f.first.AllocateNext()
	if !ok {
		return netip.Addr{}, ipallocator.ErrFull
	}
	a, err := f.addrAt(off)
	if err != nil {
		return netip.Addr{}, err
	}
	return a, f.rng.Allocate(a)
}

// addrAt maps a bitmap offset to its address the Range's own way: a
// scratch Range of the same prefix restored with that one bit set lists
// it with ForEach.
func (f *ciliumFamily) addrAt(off int) (netip.Addr, error) {
	probe := ipallocator.NewCIDRRange(f.prefix)
	one := new(big.Int).SetBit(new(big.Int), off, 1)
	if err := probe.Restore(f.prefix, one.Bytes()); err != nil {
		return netip.Addr{}, err
	}
	var a netip.Addr
	probe.ForEach(func(x netip.Addr) { a = x })
	return a, nil
}

// errCiliumExcluded classifies the error Cilium's allocateIP returns for
// an excluded address ("IP %s is excluded, owned by %s", a plain
// fmt.Errorf there).
var errCiliumExcluded = errors.New("excluded")

// ciliumIPAM is the part of Cilium's IPAM struct (pkg/ipam/types.go) the
// allocation surface goes through, for one pool: a family's allocator
// (nil: the family is disabled), the excluded addresses (excludedIPs)
// and the owner of every address (owner). Its methods do what the
// functions of pkg/ipam/allocator.go and pkg/ipam/ipam.go they name do,
// without the metrics, the pools and the upstream sync.
type ciliumIPAM struct {
	v4, v6   *ciliumFamily
	excluded map[netip.Addr]string
	owner    map[netip.Addr]string
}

func newCilium(v4, v6 netip.Prefix) *ciliumIPAM {
	c := &ciliumIPAM{excluded: map[netip.Addr]string{}, owner: map[netip.Addr]string{}}
	if v4.IsValid() {
		c.v4 = newCiliumFamily(v4)
	}
	if v6.IsValid() {
		c.v6 = newCiliumFamily(v6)
	}
	return c
}

func (c *ciliumIPAM) family(f ipam.Family) *ciliumFamily {
	if f == ipam.IPv4 {
		return c.v4
	}
	return c.v6
}

func disabled(f ipam.Family) error {
	if f == ipam.IPv4 {
		return ipam.ErrIPv4Disabled
	}
	return ipam.ErrIPv6Disabled
}

// allocateIP mirrors IPAM.allocateIP (allocator.go): an excluded address
// is refused first, then the family's allocator (hostScopeAllocator.Allocate,
// Range.Allocate) decides, and the owner is registered (registerIPOwner).
// fam is the allocator asked: ipam.DeriveFamily(a) for IPAM.AllocateIP,
// the family of the per-family Allocator otherwise (which hands an
// address of the other family to its Range: ErrNotInRange).
func (c *ciliumIPAM) allocateIP(fam ipam.Family, a netip.Addr, owner string) error {
	if by, ok := c.excluded[a]; ok {
		return fmt.Errorf("IP %s is excluded, owned by %s: %w", a, by, errCiliumExcluded)
	}
	f := c.family(fam)
	if f == nil {
		return disabled(fam)
	}
	if err := f.rng.Allocate(a); err != nil {
		return err
	}
	c.owner[a] = owner
	return nil
}

// allocateNextFamily mirrors IPAM.allocateNextFamily (allocator.go): it
// takes the allocator's next address until one is not excluded; an
// excluded one stays allocated, registered to "<owner> (excluded)", so
// that the next round does not get it again.
func (c *ciliumIPAM) allocateNextFamily(fam ipam.Family, owner string) (netip.Addr, error) {
	f := c.family(fam)
	if f == nil {
		return netip.Addr{}, fmt.Errorf("%s allocator not available", fam)
	}
	for {
		a, err := f.allocateNext()
		if err != nil {
			return netip.Addr{}, err
		}
		if _, ok := c.excluded[a]; !ok {
			c.owner[a] = owner
			return a, nil
		}
		c.owner[a] = owner + " (excluded)"
	}
}

// allocateNext mirrors IPAM.AllocateNext (allocator.go): IPv6 first, then
// IPv4; when IPv4 fails, the IPv6 address is released again.
func (c *ciliumIPAM) allocateNext(family, owner string) (v4, v6 netip.Addr, err error) {
	if (family == "ipv6" || family == "") && c.v6 != nil {
		if v6, err = c.allocateNextFamily(ipam.IPv6, owner); err != nil {
			return netip.Addr{}, netip.Addr{}, err
		}
	}
	if (family == "ipv4" || family == "") && c.v4 != nil {
		if v4, err = c.allocateNextFamily(ipam.IPv4, owner); err != nil {
			if v6.IsValid() {
				_ = c.releaseIP(ipam.IPv6, v6)
			}
			return netip.Addr{}, netip.Addr{}, err
		}
	}
	return v4, v6, nil
}

// releaseIP mirrors IPAM.releaseIPLocked (allocator.go): the family's
// allocator releases the address (Range.Release: a no-op for one that is
// not allocated or not in the range) and its owner is forgotten
// (releaseIPOwner). It never fails on an address of an enabled family.
func (c *ciliumIPAM) releaseIP(fam ipam.Family, a netip.Addr) error {
	f := c.family(fam)
	if f == nil {
		return disabled(fam)
	}
	f.rng.Release(a)
	delete(c.owner, a)
	return nil
}

// excludeIP mirrors IPAM.ExcludeIP (ipam.go), which was BlacklistIP in
// the Cilium our API follows: the address is only recorded.
func (c *ciliumIPAM) excludeIP(a netip.Addr, owner string) { c.excluded[a] = owner }

// dump mirrors Dump (allocator.go) for one family: every address the
// Range holds (hostScopeAllocator.Dump, Range.ForEach) with its owner.
func (c *ciliumIPAM) dump(fam ipam.Family) map[netip.Addr]string {
	out := map[netip.Addr]string{}
	if f := c.family(fam); f != nil {
		f.rng.ForEach(func(a netip.Addr) { out[a] = c.owner[a] })
	}
	return out
}

// --- outcomes --------------------------------------------------------------

// class is the outcome of a call, as callers branch on it.
type class string

const (
	ok           class = "ok"
	full         class = "exhausted"
	taken        class = "taken"
	outOfRange   class = "out of range"
	reserved     class = "reserved"
	excluded     class = "excluded"
	notAllocated class = "not allocated"
	famDisabled  class = "family disabled"
	unknown      class = "unclassified"
)

// ourClass classifies an error of our API by its sentinels.
func ourClass(err error) class {
	switch {
	case err == nil:
		return ok
	case errors.Is(err, ipam.ErrExcluded):
		return excluded
	case errors.Is(err, ipalloc.ErrPoolExhausted):
		return full
	case errors.Is(err, ipalloc.ErrTaken):
		return taken
	case errors.Is(err, ipalloc.ErrReserved):
		return reserved
	case errors.Is(err, ipalloc.ErrOutOfRange):
		return outOfRange
	case errors.Is(err, ipam.ErrNotAllocated), errors.Is(err, ipalloc.ErrNotAllocated):
		return notAllocated
	case errors.Is(err, ipam.ErrIPv4Disabled), errors.Is(err, ipam.ErrIPv6Disabled):
		return famDisabled
	}
	return unknown
}

// ciliumClass classifies an error of Cilium's side.
func ciliumClass(err error) class {
	var nir *ipallocator.ErrNotInRange
	switch {
	case err == nil:
		return ok
	case errors.Is(err, ipallocator.ErrFull):
		return full
	case errors.Is(err, ipallocator.ErrAllocated):
		return taken
	case errors.As(err, &nir):
		return outOfRange
	case errors.Is(err, errCiliumExcluded):
		return excluded
	case errors.Is(err, ipam.ErrIPv4Disabled), errors.Is(err, ipam.ErrIPv6Disabled):
		return famDisabled
	}
	return unknown
}

// --- addresses -------------------------------------------------------------

func ipOf(a netip.Addr) net.IP { return net.IP(a.AsSlice()) }

func addrOf(t testing.TB, ip net.IP) netip.Addr {
	t.Helper()
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		t.Fatalf("%v is not an address", ip)
	}
	return a.Unmap()
}

// nth is the address n after the first of p.
func nth(p netip.Prefix, n int) netip.Addr {
	a := p.Masked().Addr()
	for range n {
		a = a.Next()
	}
	return a
}

// lastOf is the last address of p.
func lastOf(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := range b {
		if host := p.Bits() - i*8; host < 8 {
			if host < 0 {
				host = 0
			}
			b[i] |= byte(0xff >> host)
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// dumpOf converts an Allocator's Dump to addresses.
func dumpOf(t testing.TB, m map[string]string) map[netip.Addr]string {
	t.Helper()
	out := make(map[netip.Addr]string, len(m))
	for s, owner := range m {
		a, err := netip.ParseAddr(s)
		if err != nil {
			t.Fatalf("Dump key %q: %v", s, err)
		}
		out[a] = owner
	}
	return out
}
