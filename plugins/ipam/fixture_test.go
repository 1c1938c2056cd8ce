package ipam_test

import (
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/health/healthtest"
	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/infra/servicelabel"
	"github.com/contiv-ipam/agent/plugins/contivconf"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ipam"
	"github.com/contiv-ipam/agent/plugins/ksr/model/mirror"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/nodesync"
)

// thisNode is the node the fixture's IPAM runs on.
const thisNode = "node"

// defaultTestConfig is the fixture config of the original's unit tests
// (spec §2.15): 4 allocatable pod addresses per node.
const defaultTestConfig = `
ipamConfig:
  podSubnetCIDR: 1.2.128.0/17
  podSubnetOneNodePrefixLen: 29
  vppHostSubnetCIDR: 2.3.192.0/18
  vppHostSubnetOneNodePrefixLen: 30
  nodeInterconnectCIDR: 3.4.5.192/26
  vxlanCIDR: 4.5.6.192/26
`

// ipv6TestConfig has every subnet IPv6 (mixed families are refused).
const ipv6TestConfig = `
ipamConfig:
  podSubnetCIDR: fe10:f00d::/90
  podSubnetOneNodePrefixLen: 120
  vppHostSubnetCIDR: fe30:f00d::/90
  vppHostSubnetOneNodePrefixLen: 126
  nodeInterconnectCIDR: fe40:f00d::/90
  vxlanCIDR: fe20:f00d::/120
  serviceCIDR: fd00:96::/110
`

// Test pods.
var (
	pod1 = podmodel.ID{Name: "pod1", Namespace: "default"}
	pod2 = podmodel.ID{Name: "pod2", Namespace: "default"}
	pod3 = podmodel.ID{Name: "pod3", Namespace: "kube-system"}
	pod4 = podmodel.ID{Name: "pod4", Namespace: "default"}
)

func quietLog() *slog.Logger {
	if os.Getenv("IPAM_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// fakeLabel names this node.
type fakeLabel struct{ name string }

func (l fakeLabel) GetAgentLabel() string  { return l.name }
func (l fakeLabel) GetAgentPrefix() string { return servicelabel.AllAgentsPrefix + l.name + "/" }
func (l fakeLabel) GetDifferentAgentPrefix(label string) string {
	return servicelabel.AllAgentsPrefix + label + "/"
}
func (l fakeLabel) GetAllAgentsPrefix() string { return servicelabel.AllAgentsPrefix }

// fakeNodeSync gives a fixed ID to this node.
type fakeNodeSync struct {
	id    atomic.Uint32
	mu    sync.Mutex
	nodes nodesync.Nodes
}

func (n *fakeNodeSync) GetNodeID() uint32 { return n.id.Load() }

func (n *fakeNodeSync) GetAllNodes() nodesync.Nodes {
	n.mu.Lock()
	defer n.mu.Unlock()
	return maps.Clone(n.nodes)
}

func (n *fakeNodeSync) setNodes(nodes nodesync.Nodes) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.nodes = nodes
}
func (n *fakeNodeSync) PublishNodeIPs([]*nodesync.IPWithNetwork, nodesync.IPVersion) error {
	return nil
}

// fakeLoop records pushed events.
type fakeLoop struct {
	mu     sync.Mutex
	events []api.Event
}

func (l *fakeLoop) PushEvent(ev api.Event) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, ev)
	return nil
}

func (l *fakeLoop) pushed() []api.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]api.Event(nil), l.events...)
}

// fixture is an IPAM plugin with a real ContivConf.
type fixture struct {
	beater
	ipam *ipam.Plugin
	conf *contivconf.Plugin
	sync *fakeNodeSync
	loop *fakeLoop
}

// fixtureOpts tune newFixture.
type fixtureOpts struct {
	yaml    string
	nodeID  uint32
	db      kvdb.Broker
	clock   *fakeClock           // nil: the real clock
	grace   time.Duration        // absentPodGracePeriod; 0: the default
	resv    time.Duration        // cniReservationTimeout; 0: the default
	conf    func(*ipam.Config)   // more ipam.conf changes
	claims  ipam.PoolClaimer     // the pool claimer (elastic pools)
	health  *healthtest.Recorder // nil: no StatusCheck
	metrics *prometheus.Registry
	// runtime makes the container runtime a witness (UseRuntime) with
	// runtimeGC as the GC period.
	runtime   bool
	runtimeGC time.Duration
}

// newContivConf decodes yaml strictly and starts ContivConf with it.
func newContivConf(t testing.TB, yaml string) (*contivconf.Plugin, error) {
	t.Helper()
	cfg := contivconf.DefaultConfig()
	if err := config.Decode([]byte(yaml), &cfg, "test contiv.conf"); err != nil {
		return nil, err
	}
	c := contivconf.NewPlugin(contivconf.UseConf(cfg), contivconf.UseDeps(func(d *contivconf.Deps) {
		d.Log, d.ServiceLabel = quietLog(), fakeLabel{thisNode}
	}))
	return c, c.Init()
}

// build starts IPAM without resyncing it.
func build(t testing.TB, o fixtureOpts) (*fixture, error) {
	t.Helper()
	if o.yaml == "" {
		o.yaml = defaultTestConfig
	}
	if o.nodeID == 0 {
		o.nodeID = 1
	}
	conf, err := newContivConf(t, o.yaml)
	if err != nil {
		return nil, err
	}
	f := &fixture{conf: conf, sync: &fakeNodeSync{}, loop: &fakeLoop{}}
	f.sync.id.Store(o.nodeID)
	opts := []ipam.Option{ipam.UseDeps(func(d *ipam.Deps) {
		d.Log, d.ContivConf, d.NodeSync = quietLog(), conf, f.sync
		d.ServiceLabel, d.LocalDB = fakeLabel{thisNode}, o.db
		if o.health != nil {
			d.StatusCheck = o.health
		}
		if o.metrics != nil {
			d.Metrics = fakeMetrics{o.metrics}
		}
		if o.claims != nil {
			d.PoolClaims = o.claims
		}
	})}
	if o.clock != nil {
		opts = append(opts, ipam.UseClock(o.clock))
	}
	if o.grace != 0 || o.resv != 0 || o.conf != nil {
		c := ipam.DefaultConfig()
		if o.conf != nil {
			o.conf(&c)
		}
		if o.grace != 0 {
			c.AbsentPodGracePeriod = o.grace
		}
		if o.resv != 0 {
			c.CNIReservationTimeout = o.resv
		}
		opts = append(opts, ipam.UseConf(c))
	}
	f.ipam = ipam.NewPlugin(opts...)
	f.beater = beater{p: f.ipam, clock: o.clock}
	if err := f.ipam.Init(); err != nil {
		return nil, err
	}
	if o.runtime {
		if err := f.ipam.UseRuntime(o.runtimeGC); err != nil {
			return nil, err
		}
	}
	t.Cleanup(func() { f.close(t) })
	return f, f.ipam.AfterInit()
}

// close stops the plugin (again: Close is idempotent).
func (f *fixture) close(t testing.TB) {
	t.Helper()
	if err := f.ipam.Close(); err != nil {
		t.Errorf("ipam Close: %v", err)
	}
}

// newFixture builds IPAM and runs its first resync with ks.
func newFixture(t testing.TB, o fixtureOpts, ks api.KubeStateData) (*fixture, error) {
	t.Helper()
	f, err := build(t, o)
	if err != nil {
		return nil, err
	}
	if ks == nil {
		ks = api.KubeStateData{}
	}
	return f, f.ipam.Resync(&api.DBResync{KubeState: ks}, ks, 1, nil)
}

// mustFixture is newFixture that fails the test on error.
func mustFixture(t testing.TB, o fixtureOpts, ks api.KubeStateData) *fixture {
	t.Helper()
	f, err := newFixture(t, o, ks)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// testBeatInterval is the heartbeat of the tests' mirror markers: long
// enough that no test's clock makes them stale unless it means to.
const testBeatInterval = "1000h"

// marker is a contiv-ksr mirror marker with heartbeat hb, as the watch
// carries it.
func marker(t testing.TB, hb time.Time, pods int, interval string) *structpb.Struct {
	t.Helper()
	m := mirror.Marker{Leader: "ksr-test", ResourceVersion: "1", Pods: pods, Heartbeat: hb, Interval: interval}
	var s structpb.Struct
	if err := protojson.Unmarshal(m.Encode(), &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

// beat delivers a newer contiv-ksr mirror marker through Update, as the
// watch does: the evidence that lets absent pods be released (see
// keeper/evidence.go). The first call delivers two (an agent takes the
// first marker it sees as a baseline, not as a sign of life). With a fake
// clock, the clock first moves by a millisecond, so that the marker is
// newer than the allocations made before the call.
func (b *beater) beat(t testing.TB) {
	t.Helper()
	if b.hb.IsZero() {
		b.hb = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		b.deliver(t)
	}
	if b.clock != nil {
		b.clock.Advance(time.Millisecond)
	}
	b.hb = b.hb.Add(time.Second)
	b.deliver(t)
}

// beater delivers contiv-ksr's mirror markers to an IPAM plugin.
type beater struct {
	p     *ipam.Plugin
	clock *fakeClock // nil: the real clock
	hb    time.Time  // the heartbeat of the last marker (zero: none yet)
	// pods and interval are the markers' count of pods and heartbeat
	// period ("": testBeatInterval).
	pods     int
	interval string
}

func (b *beater) deliver(t testing.TB) {
	t.Helper()
	interval := b.interval
	if interval == "" {
		interval = testBeatInterval
	}
	if b.hb.IsZero() {
		b.hb = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	ev := &api.KubeStateChange{Resource: mirror.Keyword, Key: mirror.Key, NewValue: marker(t, b.hb, b.pods, interval)}
	if !b.p.HandlesEvent(ev) {
		t.Fatal("IPAM does not handle the mirror marker")
	}
	if _, err := b.p.Update(ev, nil); err != nil {
		t.Fatal(err)
	}
}

func cidr(s string) *net.IPNet {
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		panic(err)
	}
	return n
}
