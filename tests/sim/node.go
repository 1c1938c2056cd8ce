package sim

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/contiv-ipam/agent/infra/agent"
	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/health"
	"github.com/contiv-ipam/agent/infra/kvdb/bolt"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd"
	"github.com/contiv-ipam/agent/infra/servicelabel"
	"github.com/contiv-ipam/agent/plugins/contivconf"
	"github.com/contiv-ipam/agent/plugins/controller"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ipam"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/nodesync"
)

// ContivConf is the contiv.conf of every simulated node: node subnets for
// up to 32767 node IDs (the default config's /16 of /24s serves 256).
const ContivConf = `
ipamConfig:
  podSubnetCIDR: 10.128.0.0/9
  podSubnetOneNodePrefixLen: 24
  vppHostSubnetCIDR: 172.16.0.0/12
  vppHostSubnetOneNodePrefixLen: 28
  nodeInterconnectCIDR: 100.64.0.0/16
  vxlanCIDR: 100.65.0.0/16
`

// NodeOptions tune the agent of a simulated node; the zero value is the
// agent's defaults with the simulation's ContivConf.
type NodeOptions struct {
	// DialTimeout replaces etcd.conf's dial-timeout (default 1s), which
	// bounds the connection probe at Init: a cold start of thousands of
	// clients at once needs more.
	DialTimeout time.Duration
	// EndpointsPerNode is how many of the members each node's client
	// lists (0: all); fewer saves file descriptors (one connection per
	// listed member).
	EndpointsPerNode int
	// NoEventHistory turns the controller's event history off (it keeps
	// up to 10,000 records per node by default).
	NoEventHistory bool
}

// Node is one simulated node: the agent's plugins for its node name
// (etcd client, bolt, servicelabel, contivconf, nodesync, ipam and the
// controller, the DB watcher included), run by an agent.Agent as
// contiv-agent runs them, plus the probe handler last in the loop. Its
// fields are set once by startNode; the probe's counters are atomic.
type Node struct {
	Name  string
	Index int // its place in the Sim's list of every node started
	dir   string

	agent *agent.Agent
	ctrl  *controller.Plugin
	ipam  *ipam.Plugin
	ns    *nodesync.Plugin
	probe *probe

	started time.Time
	stopped atomic.Bool
	// fatal is when the controller reported its loop stopped by a fatal
	// error (UnixNano; 0: it did not): a real agent is then restarted by
	// Kubernetes (its liveness probe fails), the simulation restarts the
	// node (Sim.WaitReady).
	fatal    atomic.Int64
	fatalErr atomic.Value // error
}

// loopHealth is the controller's health.Reporter: it notes a fatal loop.
type loopHealth struct{ n *Node }

func (h loopHealth) Register(string, health.Probe) {}

func (h loopHealth) ReportStateChange(_ string, state health.State, err error) {
	if state == health.Error && err != nil {
		h.n.fatalErr.Store(err)
		h.n.fatal.CompareAndSwap(0, time.Now().UnixNano())
	}
}

// Fatal returns when the node's loop stopped by a fatal error, and the
// error; a nil error while the loop runs.
func (n *Node) Fatal() (time.Time, error) {
	at := n.fatal.Load()
	if at == 0 {
		return time.Time{}, nil
	}
	err, _ := n.fatalErr.Load().(error)
	return time.Unix(0, at), err
}

// startNode builds the node's plugins and starts them (Init, AfterInit);
// the first resync runs in the background and the probe notes when the
// node is ready.
// started is the node's first start (time to ready counts from it); zero
// means now.
func startNode(name string, index int, dir string, endpoints []string, o NodeOptions, log *slog.Logger,
	cc contivconf.Config, obs observer, started time.Time) (*Node, error) {
	if started.IsZero() {
		started = time.Now()
	}
	n := &Node{Name: name, Index: index, dir: dir, started: started}
	log = log.With("node", name)
	ec := etcd.DefaultConfig()
	ec.Endpoints = endpoints
	if o.DialTimeout > 0 {
		ec.DialTimeout = o.DialTimeout
	}
	noEnv := func(string) (string, bool) { return "", false }
	etcdP := etcd.NewPlugin(etcd.UseConf(ec), etcd.UseEnv(noEnv), etcd.UseDeps(func(d *etcd.Deps) {
		d.Cfg, d.Log = config.NoFile, log
	}))
	bc := bolt.DefaultConfig()
	bc.DBPath = filepath.Join(dir, "bolt.db")
	boltP := bolt.NewPlugin(bolt.UseConf(bc), bolt.UseDeps(func(d *bolt.Deps) { d.Cfg, d.Log = config.NoFile, log }))
	label := servicelabel.NewPlugin(servicelabel.UseLabel(name), servicelabel.UseDeps(func(d *servicelabel.Deps) {
		d.Cfg, d.Log = config.NoFile, log
	}))
	conf := contivconf.NewPlugin(contivconf.UseConf(cc), contivconf.UseDeps(func(d *contivconf.Deps) {
		d.Cfg, d.Log, d.ServiceLabel = config.NoFile, log, label
	}))
	loop := &controller.LoopRef{}
	n.ns = nodesync.NewPlugin(nodesync.UseEnv(noEnv), nodesync.UseDeps(func(d *nodesync.Deps) {
		d.Cfg, d.Log = config.NoFile, log
		d.ServiceLabel, d.DB, d.EventLoop = label, etcdP, loop
		d.Presence, d.LocalDB = etcdP, boltP
		d.MaxNodeID = func() uint32 { return ipam.MaxNodeID(conf.GetIPAMConfig(), conf.GetStaticDefaultGW()) }
	}))
	n.ipam = ipam.NewPlugin(ipam.UseConf(ipam.DefaultConfig()), ipam.UseDeps(func(d *ipam.Deps) {
		d.Cfg, d.Log = config.NoFile, log
		d.ContivConf, d.NodeSync, d.ServiceLabel, d.LocalDB = conf, n.ns, label, boltP
		d.PoolClaims = ipam.StoreClaimer{DB: etcdP}
	}))
	n.probe = &probe{node: n, obs: obs, prefix: podmodel.NodePrefix(name)}
	ctrlConf := controller.DefaultConfig()
	if o.NoEventHistory {
		ctrlConf.RecordEventHistory = false
	}
	n.ctrl = controller.NewPlugin(controller.UseConf(ctrlConf), controller.UseLoopRef(loop),
		// The agent's order (contiv_agent.go) without podmanager, whose
		// CNI socket the simulation replaces by pushing AddPod and
		// DeletePod into the loop itself; the probe comes last, so it
		// sees an event once every real handler has handled it.
		controller.UseHandlers(conf, n.ns, n.ipam, n.probe),
		controller.UseDeps(func(d *controller.Deps) {
			d.Cfg, d.Log = config.NoFile, log
			d.RemoteDB, d.LocalDB = etcdP, boltP
			d.NodeName = label.GetAgentLabel
			d.StatusCheck = loopHealth{n}
		}))
	a, err := agent.NewAgent(agent.Plugins(etcdP, boltP, label, conf, n.ns, n.ipam, n.ctrl),
		agent.Args([]string{}), agent.Logger(log), agent.StartTimeout(5*time.Minute), agent.StopTimeout(30*time.Second))
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", name, err)
	}
	if err := a.Start(); err != nil {
		return nil, fmt.Errorf("node %s: start: %w", name, err)
	}
	n.agent = a
	return n, nil
}

// Stop closes the node's plugins (the agent's clean stop: the presence
// lease is revoked, bolt closed). A node is stopped once.
func (n *Node) Stop() error {
	if n.stopped.Swap(true) {
		return nil
	}
	return n.agent.Stop()
}

// Ready tells whether the node's IPAM has a node ID and a pod subnet.
func (n *Node) Ready() bool { return n.ns.GetNodeID() != 0 && n.ipam.PodSubnetThisNode() != nil }

// ReadyAfter is the time from the node's start until the probe first saw
// it ready, 0 while it is not.
func (n *Node) ReadyAfter() time.Duration { return time.Duration(n.probe.readyAfter.Load()) }

// ID is the node ID nodesync holds (0: none).
func (n *Node) ID() uint32 { return n.ns.GetNodeID() }

// IPAM is the node's IPAM plugin.
func (n *Node) IPAM() *ipam.Plugin { return n.ipam }

// PodChanges counts the KubeStateChange events of pods the node's loop
// handled; Foreign counts those of another node's pods among them (the
// per-node layout promises none).
func (n *Node) PodChanges() (own, foreign int64) {
	return n.probe.podChanges.Load(), n.probe.foreign.Load()
}

// observer hears the pod changes every node's probe handles.
type observer interface {
	podChange(n *Node, key string, at time.Time)
}

// probe is the simulation's event handler, the last of every node's
// loop: it notes when the node is first ready and counts the pod changes
// it handles. It runs on the loop's goroutine; its counters are atomic
// because the simulation reads them from its own.
type probe struct {
	node   *Node
	obs    observer
	prefix string // pod.NodePrefix of the node

	readyAfter atomic.Int64 // ns from start to ready; 0 until then
	podChanges atomic.Int64
	foreign    atomic.Int64
	resyncs    atomic.Int64
}

var _ api.EventHandler = (*probe)(nil)

func (p *probe) String() string { return "sim-probe" }

// HandlesEvent is true for every event: readiness can follow any of them.
func (p *probe) HandlesEvent(api.Event) bool { return true }

func (p *probe) Resync(api.Event, api.KubeStateData, int, api.ResyncOperations) error {
	p.resyncs.Add(1)
	p.checkReady()
	return nil
}

func (p *probe) Update(ev api.Event, _ api.UpdateOperations) (string, error) {
	p.checkReady()
	ksc, ok := ev.(*api.KubeStateChange)
	if !ok || ksc.Resource != podmodel.Keyword {
		return "", nil
	}
	now := time.Now()
	p.podChanges.Add(1)
	if !strings.HasPrefix(ksc.Key, p.prefix) {
		p.foreign.Add(1)
	}
	p.obs.podChange(p.node, ksc.Key, now)
	return "", nil
}

func (p *probe) Revert(api.Event) error { return nil }

// checkReady records the time to ready the first time the node is.
func (p *probe) checkReady() {
	if p.readyAfter.Load() != 0 || p.node.ns == nil || !p.node.Ready() {
		return
	}
	p.readyAfter.CompareAndSwap(0, int64(max(time.Since(p.node.started), 1)))
}

// stopAll stops nodes concurrently, at most par at a time, and joins the
// errors.
func stopAll(nodes []*Node, par int) error {
	var mu sync.Mutex
	var errs []error
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := n.Stop(); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
