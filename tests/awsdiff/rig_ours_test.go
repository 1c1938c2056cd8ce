package awsdiff

import (
	"io"
	"log/slog"
	"net/netip"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/infra/kvdb/bolt"
	"github.com/contiv-ipam/agent/infra/servicelabel"
	"github.com/contiv-ipam/agent/plugins/contivconf"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ipam/addressing"
	"github.com/contiv-ipam/agent/plugins/ipam/keeper"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// --- our side --------------------------------------------------------------

// contivConf gives node 1 the pod subnet 10.0.0.8/29, whose four pod
// addresses (.10 to .13) are excluded (nodeWindow) so that every address
// handed out comes from the pools the sequences add, as every address of
// the AWS datastore comes from an ENI.
const contivConf = `
ipamConfig:
  podSubnetCIDR: 10.0.0.0/16
  podSubnetOneNodePrefixLen: 29
  vppHostSubnetCIDR: 172.30.0.0/16
  vppHostSubnetOneNodePrefixLen: 24
  vxlanCIDR: 192.168.30.0/24
`

var (
	nodeSubnet = netip.MustParsePrefix("10.0.0.8/29")
	nodeWindow = []netip.Prefix{netip.MustParsePrefix("10.0.0.10/31"), netip.MustParsePrefix("10.0.0.12/31")}
)

// cooldown is the address cooldown of both sides: our keeper's
// AddressCooldown and the datastore's IP_COOLDOWN_PERIOD (whole seconds).
const cooldown = 30 * time.Second

// label names this node.
type label struct{}

func (label) GetAgentLabel() string  { return "node1" }
func (label) GetAgentPrefix() string { return servicelabel.AllAgentsPrefix + "node1/" }
func (label) GetDifferentAgentPrefix(l string) string {
	return servicelabel.AllAgentsPrefix + l + "/"
}
func (label) GetAllAgentsPrefix() string { return servicelabel.AllAgentsPrefix }

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// fakeClock is the keeper's clock: it moves only when Advance says so,
// and fires the timers that are due then.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	at      time.Time
	ch      chan time.Time
	stopped bool
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_800_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer(d time.Duration) (<-chan time.Time, func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{at: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.ch <- c.now
		t.stopped = true
	} else {
		c.timers = append(c.timers, t)
	}
	return t.ch, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !t.stopped
		t.stopped = true
		return was
	}
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.timers[:0]
	for _, t := range c.timers {
		switch {
		case t.stopped:
		case !t.at.After(c.now):
			t.ch <- c.now
			t.stopped = true
		default:
			kept = append(kept, t)
		}
	}
	c.timers = kept
}

var _ keeper.Clock = (*fakeClock)(nil)

// ours is our keeper (the engine behind plugins/ipam's pools) on node 1,
// resynced once with no Kubernetes state.
type ours struct {
	k   *keeper.Keeper
	clk *fakeClock
	db  kvdb.Broker // nil: in memory
	in  *keeper.ResyncInput
}

// newOurs starts a keeper; with onBolt its allocations are kept in a bolt
// file in t.TempDir() (ImportCheckpoint needs a store), else in memory.
// Close runs at cleanup.
func newOurs(t testing.TB, clk *fakeClock, onBolt bool) *ours {
	t.Helper()
	cfg := contivconf.DefaultConfig()
	if err := config.Decode([]byte(contivConf), &cfg, "awsdiff contiv.conf"); err != nil {
		t.Fatalf("contiv.conf: %v", err)
	}
	conf := contivconf.NewPlugin(contivconf.UseConf(cfg), contivconf.UseDeps(func(d *contivconf.Deps) {
		d.Log, d.ServiceLabel = discard(), label{}
	}))
	if err := conf.Init(); err != nil {
		t.Fatalf("contivconf Init: %v", err)
	}
	st, err := addressing.BuildState(conf.GetIPAMConfig(), 1, "node1", netip.Addr{}, addressing.PodCIDRs{})
	if err != nil {
		t.Fatalf("addressing: %v", err)
	}
	if st.PodThis != nodeSubnet {
		t.Fatalf("node 1's pod subnet is %s, the test expects %s", st.PodThis, nodeSubnet)
	}
	var db kvdb.Broker
	if onBolt {
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
	in := &keeper.ResyncInput{State: st, KubeState: api.KubeStateData{}, Event: "awsdiff"}
	for _, p := range nodeWindow {
		in.Exclusions = append(in.Exclusions, keeper.Exclusion{Prefix: p, Owner: "awsdiff: the node's own subnet is not an ENI"})
	}
	o := &ours{clk: clk, db: db, in: in}
	o.start(t)
	return o
}

// start starts a keeper on o's store and resyncs it; Close runs at
// cleanup (registered after bolt's Close: it runs before it).
func (o *ours) start(t testing.TB) {
	t.Helper()
	kc := keeper.DefaultConfig()
	kc.AddressCooldown = cooldown
	kc.CNIReservationTimeout = 0
	o.k = keeper.New(o.db, kc, discard(), o.clk, keeper.NewMetrics())
	o.k.Start()
	t.Cleanup(o.k.Close)
	if rep := o.k.Do(&keeper.Request{Kind: keeper.ReqResync, Resync: o.in}); rep.Err != nil {
		t.Fatalf("resync: %v", rep.Err)
	}
}

// podOf is the pod of an attachment in the sequences: one pod per
// container.
func podOf(key podmanager.AttachmentKey) podmodel.ID {
	return podmodel.ID{Namespace: "default", Name: "pod-" + key.ContainerID}
}

// assign allocates key's address.
func (o *ours) assign(key podmanager.AttachmentKey) (netip.Addr, error) {
	rep := o.k.Do(&keeper.Request{Kind: keeper.ReqAllocate, Pod: podOf(key), Key: key})
	return rep.Addr, rep.Err
}

// unassign releases key's address: held tells whether it held one.
func (o *ours) unassign(key podmanager.AttachmentKey) (a netip.Addr, held bool, err error) {
	rep := o.k.Do(&keeper.Request{Kind: keeper.ReqRelease, Pod: podOf(key), Key: key})
	return rep.Addr, rep.Held, rep.Err
}

// added sums the stats of the added pools: the addresses in them (neither
// deleted nor excluded), assigned, cooling down.
func (o *ours) added() (total, assigned, cooling int, err error) {
	ns, err := o.k.Stats()
	if err != nil {
		return 0, 0, 0, err
	}
	for _, s := range ns.Pools {
		if s.CIDR == nodeSubnet.String() {
			continue
		}
		total += int(s.Total - s.Excluded)
		assigned += int(s.Assigned)
		cooling += int(s.Cooldown)
	}
	return total, assigned, cooling, nil
}
