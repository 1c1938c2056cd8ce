package ciliumdiff

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cilium/cilium/pkg/cidr"
	ciliumipam "github.com/cilium/cilium/pkg/ipam"
	ipamOption "github.com/cilium/cilium/pkg/ipam/option"
	"github.com/cilium/cilium/pkg/ipam/service/ipallocator"
	"github.com/cilium/cilium/pkg/node"
	"github.com/cilium/cilium/pkg/option"

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

// dualStack is the contiv.conf of every test but the /64 and the
// single-stack ones: node 1 gets 10.1.0.16/28 and fd00:10:1::10/124, 12
// addresses each to hand out.
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

// ipv4Only is dualStack without its IPv6 part.
const ipv4Only = `
ipamConfig:
  podSubnetCIDR: 10.1.0.0/16
  podSubnetOneNodePrefixLen: 28
  vppHostSubnetCIDR: 172.30.0.0/16
  vppHostSubnetOneNodePrefixLen: 24
  vxlanCIDR: 192.168.30.0/24
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

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// storage selects the LocalDB of our plugin.
type storage int

const (
	inMemory storage = iota // LocalDB nil: most random sequences
	onBolt                  // a real bolt file in t.TempDir(): every call is fsync'ed
)

// newOurs starts the IPAM plugin on node 1 with the contiv.conf yaml and
// no address cooldown (Cilium has none; T10 pins ours), and runs its
// first resync with no Kubernetes state; Close runs at cleanup.
func newOurs(t testing.TB, yaml string, st storage) *ipam.Plugin {
	t.Helper()
	return newOursWith(t, yaml, st, func(c *ipam.Config) { c.AddressCooldown = 0 })
}

// newOursWith is newOurs with ipam.conf changed by conf (from the
// defaults).
func newOursWith(t testing.TB, yaml string, st storage, conf func(*ipam.Config)) *ipam.Plugin {
	t.Helper()
	cfg := contivconf.DefaultConfig()
	if err := config.Decode([]byte(yaml), &cfg, "test contiv.conf"); err != nil {
		t.Fatalf("contiv.conf: %v", err)
	}
	cc := contivconf.NewPlugin(contivconf.UseConf(cfg), contivconf.UseDeps(func(d *contivconf.Deps) {
		d.Log, d.ServiceLabel = discard(), label{}
	}))
	if err := cc.Init(); err != nil {
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
	ipamConf := ipam.DefaultConfig()
	conf(&ipamConf)
	p := ipam.NewPlugin(ipam.UseConf(ipamConf), ipam.UseDeps(func(d *ipam.Deps) {
		d.Log, d.ContivConf, d.NodeSync, d.ServiceLabel, d.LocalDB = discard(), cc, nodeSync{}, label{}, db
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

// reservationsOf is the count of expiration timers (reservations
// awaiting confirmation) in the status line of our Dump.
func reservationsOf(t testing.TB, status string) int {
	t.Helper()
	last := status[strings.LastIndex(status, "; ")+2:]
	var n int
	if _, err := fmt.Sscanf(last, "%d reservations awaiting confirmation", &n); err != nil {
		t.Fatalf("status %q: no count of reservations: %v", status, err)
	}
	return n
}

// --- Cilium's side ---------------------------------------------------------

// addressing is the node addressing Cilium's IPAM reads its allocation
// CIDRs from (pkg/node.Addressing): the node's pod subnets.
type addressing struct{ v4, v6 addressFamily }

func (a addressing) IPv4() node.AddressingFamily { return a.v4 }
func (a addressing) IPv6() node.AddressingFamily { return a.v6 }

// addressFamily is one family of addressing.
type addressFamily struct{ prefix netip.Prefix }

func (addressFamily) Router() net.IP          { return nil }
func (addressFamily) PrimaryExternal() net.IP { return nil }
func (f addressFamily) AllocationCIDR() *cidr.CIDR {
	if !f.prefix.IsValid() {
		return nil
	}
	return cidr.MustParseCIDR(f.prefix.String())
}

var _ node.Addressing = addressing{}

// cilium is Cilium's agent IPAM, the real pkg/ipam.IPAM of v1.20.2, built
// as Cilium's own tests build it: NewIPAM with a logger, the node
// addressing and the agent configuration (cluster-pool mode, the
// families of the node), then ConfigureAllocator, which gives each
// family a host-scope allocator over its allocation CIDR. None of the
// other parameters is read in cluster-pool mode when the pool is given,
// and every call here gives the default pool (PoolDefault(), as the
// agent's callers do). Its metrics are Cilium's no-op defaults.
type cilium struct {
	*ciliumipam.IPAM
}

// pool is the pool every call gives.
var pool = ciliumipam.PoolDefault()

func newCilium(v4, v6 netip.Prefix) *cilium {
	cfg := &option.DaemonConfig{EnableIPv4: v4.IsValid(), EnableIPv6: v6.IsValid(), IPAM: ipamOption.IPAMClusterPool}
	c := ciliumipam.NewIPAM(ciliumipam.NewIPAMParams{
		Logger:         discard(),
		NodeAddressing: addressing{v4: addressFamily{v4}, v6: addressFamily{v6}},
		AgentConfig:    cfg,
	})
	c.ConfigureAllocator()
	return &cilium{c}
}

// dump is Cilium's Dump of both families, by address.
func (c *cilium) dump(t testing.TB) map[netip.Addr]string {
	t.Helper()
	v4, v6, _ := c.Dump()
	out := dumpOf(t, v4)
	for a, o := range dumpOf(t, v6) {
		out[a] = o
	}
	return out
}

// releaseOwner is what a release by owner is in Cilium v1.20.2, which has
// no such call (its callers release by address): ReleaseIP of every
// address its Dump lists with that owner.
func (c *cilium) releaseOwner(t testing.TB, owner string) error {
	t.Helper()
	var errs []error
	for a, o := range c.dump(t) {
		if o == owner {
			errs = append(errs, c.ReleaseIP(a, pool))
		}
	}
	return errors.Join(errs...)
}

// reserveRouter holds x's gateway and NAT loopback on Cilium's side
// (owner "reserved"), which ours never hands out, so that both have the
// same free addresses (T1).
func (c *cilium) reserveRouter(t testing.TB, x fam) {
	t.Helper()
	for _, a := range []netip.Addr{x.gateway, x.natLoop} {
		if err := c.AllocateIP(a, "reserved", pool); err != nil {
			t.Fatalf("cilium: reserve %s: %v", a, err)
		}
	}
}

// --- outcomes --------------------------------------------------------------

// class is the outcome of a call, as callers branch on it.
type class string

const (
	ok            class = "ok"
	full          class = "exhausted"
	taken         class = "taken"
	outOfRange    class = "out of range"
	reserved      class = "reserved"
	excluded      class = "excluded"
	notAllocated  class = "not allocated"
	famDisabled   class = "family disabled"
	timerExists   class = "timer exists"
	timerMismatch class = "no such timer"
	badArgument   class = "bad argument"
	unknown       class = "unclassified"
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
	case errors.Is(err, ipam.ErrTimerExists):
		return timerExists
	case errors.Is(err, ipam.ErrReservationMismatch):
		return timerMismatch
	}
	for _, s := range []string{"owner name", "want a positive duration", "family \""} {
		if strings.Contains(err.Error(), s) {
			return badArgument
		}
	}
	return unknown
}

// ciliumClass classifies an error of Cilium's IPAM: by its sentinels, and
// by the text of the errors it makes with fmt.Errorf.
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
	case errors.Is(err, ciliumipam.ErrIPv4Disabled), errors.Is(err, ciliumipam.ErrIPv6Disabled):
		return famDisabled
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "is excluded, owned by"):
		return excluded
	case strings.Contains(msg, "allocator not available"):
		return famDisabled
	case strings.Contains(msg, "expiration timer already registered"):
		return timerExists
	case strings.Contains(msg, "no expiration timer registered"), strings.Contains(msg, "UUID mismatch"):
		return timerMismatch
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

// dumpOf converts a Dump map to addresses.
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

// fam is one family of node 1's pod subnet and the addresses the
// sequences aim at.
type fam struct {
	f                               ipam.Family
	prefix                          netip.Prefix
	network, gateway, natLoop, last netip.Addr
	window                          []netip.Addr // what ours hands out: gateway+1 to natLoop-1
	outside                         []netip.Addr // same family, outside the pod subnet
}

func famOf(f ipam.Family) fam {
	p := podV4
	outside := []netip.Addr{netip.MustParseAddr("10.1.0.15"), netip.MustParseAddr("10.1.0.32"),
		netip.MustParseAddr("10.1.255.254"), netip.MustParseAddr("192.0.2.1")}
	if f == ipam.IPv6 {
		p = podV6
		outside = []netip.Addr{netip.MustParseAddr("fd00:10:1::f"), netip.MustParseAddr("fd00:10:1::20"),
			netip.MustParseAddr("fd00:10:1:ffff::1"), netip.MustParseAddr("2001:db8::1")}
	}
	last := lastOf(p)
	x := fam{f: f, prefix: p, network: p.Addr(), gateway: nth(p, 1), natLoop: last.Prev(), last: last, outside: outside}
	for a := x.gateway.Next(); a != x.natLoop; a = a.Next() {
		x.window = append(x.window, a)
	}
	return x
}

// famOfAddr is the family of a.
func famOfAddr(a netip.Addr) ipam.Family {
	if a.Is4() {
		return ipam.IPv4
	}
	return ipam.IPv6
}

// allocatorOf is our per-family Allocator of f.
func allocatorOf(p *ipam.Plugin, f ipam.Family) ipam.Allocator {
	if f == ipam.IPv4 {
		return p.IPv4Allocator()
	}
	return p.IPv6Allocator()
}

// minute is the unit of the timers' timeouts.
const minute = time.Minute
