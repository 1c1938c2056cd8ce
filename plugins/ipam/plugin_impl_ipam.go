package ipam

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/contiv-ipam/agent/infra"
	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/health"
	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/infra/metrics"
	"github.com/contiv-ipam/agent/infra/rest"
	"github.com/contiv-ipam/agent/infra/servicelabel"
	"github.com/contiv-ipam/agent/plugins/contivconf"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ipam/addressing"
	"github.com/contiv-ipam/agent/plugins/ipam/keeper"
	"github.com/contiv-ipam/agent/plugins/nodesync"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// Deps are the IPAM plugin's dependencies.
type Deps struct {
	infra.PluginDeps
	// ContivConf gives the IPAM settings of contiv.conf.
	ContivConf contivconf.API
	// NodeSync gives this node's ID.
	NodeSync nodesync.API
	// ServiceLabel gives this node's name.
	ServiceLabel servicelabel.ReaderAPI
	// LocalDB keeps the pod allocations (bolt); nil keeps them in memory
	// only (tests).
	LocalDB kvdb.Broker
	HTTP    rest.HTTPHandlers // optional
	Metrics metrics.API       // optional
	// StatusCheck hears whether IPAM is initialised (optional): it is
	// not ready before the first resync, nor while it waits for a valid
	// pod CIDR of this node.
	StatusCheck health.Reporter
	// PoolClaims writes this node's pool claim for the elastic pools
	// (optional; with ipam.conf warmTarget > 0).
	PoolClaims PoolClaimer
	// StatusDB is the store of this node's status record (etcd's root
	// broker: the key is agentstatus.Key(node)); nil: no record
	// (optional; see statuspub.go and ipam.conf statusPublishPeriod).
	StatusDB kvdb.Broker
	// REST gives the agent's REST base URL for the status record
	// (optional: without it the record has no URL).
	REST rest.Advertiser
}

// Plugin is the IPAM plugin.
type Plugin struct {
	Deps

	fixedConf *Config // UseConf
	loaded    config.Preloaded[Config]
	clock     keeper.Clock // UseClock (tests); the system clock by default
	cfg       Config

	// st is the derived addressing, replaced whole at each resync (by the
	// event loop's goroutine) and read by any API caller.
	st      atomic.Pointer[addressing.State]
	waiting atomic.Pointer[waitError] // why st is nil after a resync
	readyMu sync.Mutex                // orders the readiness reports
	keeper  *keeper.Keeper
	metrics *ipamMetrics
	page    *statusPage // GET / for browsers (statuspage.go); nil without HTTP

	// exclMu guards runtimeExcl, the exclusions made at run time
	// (BlacklistIP, ReserveLocalRoutes): appended by any caller, read at
	// each resync.
	exclMu      sync.Mutex
	runtimeExcl []keeper.Exclusion

	// The claimer goroutine (elastic pools): started by AfterInit,
	// stopped by Close.
	stopClaimer context.CancelFunc
	claimerDone chan struct{}

	// statusPub publishes the agentstatus record (nil: off); started by
	// AfterInit, stopped by Close.
	statusPub *statusPublisher
}

var (
	_ infra.Plugin     = (*Plugin)(nil)
	_ infra.PostInit   = (*Plugin)(nil)
	_ api.EventHandler = (*Plugin)(nil)
	_ API              = (*Plugin)(nil)
	_ podmanager.IPAM  = (*Plugin)(nil)
)

// Init checks the dependencies, loads ipam.conf and registers REST
// handlers and metrics. Addresses are computed at the first resync.
func (p *Plugin) Init() error {
	switch {
	case p.ContivConf == nil:
		return errors.New("ipam needs ContivConf")
	case p.NodeSync == nil:
		return errors.New("ipam needs NodeSync")
	case p.ServiceLabel == nil:
		return errors.New("ipam needs ServiceLabel")
	}
	cfg, err := p.loadConfig()
	if err != nil {
		return err
	}
	p.cfg = cfg
	if p.LocalDB == nil {
		p.Log.Warn("no LocalDB: pod allocations are kept in memory only")
	}
	if p.clock == nil {
		p.clock = keeper.RealClock{}
	}
	p.metrics = newIPAMMetrics(p)
	p.keeper = keeper.New(p.LocalDB, cfg.Config, p.Log, p.clock, p.metrics.keeper)
	p.keeper.OnStoreHealth(func(failing error) {
		if failing != nil {
			p.Log.Error("the store does not take the pod allocations: IPAM is not ready", "error", failing)
		} else {
			p.Log.Info("the store takes the pod allocations again: IPAM is ready")
		}
		p.reportReadiness()
	})
	if p.Metrics != nil {
		if err := p.Metrics.Register(p.metrics); err != nil {
			return fmt.Errorf("registering ipam metrics: %w", err)
		}
	}
	if p.HTTP != nil {
		p.registerHandlers()
	}
	p.statusPub = newStatusPublisher(p)
	if p.StatusCheck != nil {
		p.StatusCheck.Register(p.String(), nil)
	}
	return nil
}

// AfterInit starts the keeper, the single writer of the pod addresses;
// the first resync comes after it (the controller starts its watcher in
// its own AfterInit, which runs later).
func (p *Plugin) AfterInit() error {
	p.keeper.Start()
	if p.PoolClaims != nil && p.cfg.WarmTarget > 0 {
		ctx, cancel := context.WithCancel(context.Background())
		p.stopClaimer = cancel
		p.claimerDone = make(chan struct{})
		go func() {
			defer close(p.claimerDone)
			p.runClaimer(ctx, p.keeper.Claims())
		}()
	}
	if p.statusPub != nil {
		p.statusPub.start()
	}
	return nil
}

// Close stops the keeper after the batch it is storing; the calls decided
// meanwhile, still queued, or made after fail with an error (their
// decisions undone). Allocations are durable as they are acknowledged, so
// nothing is lost. It first stops the status publisher, and deletes the
// status record once the keeper is closed (within 2 s, best effort).
func (p *Plugin) Close() error {
	publishing := p.statusPub != nil && p.statusPub.done != nil
	if publishing {
		p.statusPub.halt()
	}
	if p.keeper != nil {
		p.keeper.Close()
	}
	if publishing {
		p.statusPub.wait() // then deletes the record
		p.statusPub = nil
	}
	if p.stopClaimer != nil {
		p.stopClaimer()
		<-p.claimerDone
	}
	return nil
}

// read runs fn with the addressing; fn is not called before the first
// resync.
func (p *Plugin) read(fn func(st *addressing.State)) {
	if st := p.st.Load(); st != nil {
		fn(st)
	}
}

// ready tells whether a resync has computed the addressing.
func (p *Plugin) ready() bool { return p.st.Load() != nil }

// NodeIPAddress implements API.
func (p *Plugin) NodeIPAddress(nodeID uint32) (ip net.IP, network *net.IPNet, err error) {
	err = keeper.ErrNotReady
	p.read(func(st *addressing.State) {
		if !st.NodeIC.IsValid() {
			err = fmt.Errorf("nodeInterconnectCIDR is undefined: %w", ErrUndefined)
			return
		}
		var a netip.Addr
		if a, err = addressing.NodeAddress(st.NodeIC, nodeID, st.Gateway); err == nil {
			ip, network = addressing.ToIP(a), addressing.ToIPNet(st.NodeIC)
		}
	})
	return ip, network, err
}

// VxlanIPAddress implements API.
func (p *Plugin) VxlanIPAddress(nodeID uint32) (ip net.IP, network *net.IPNet, err error) {
	err = keeper.ErrNotReady
	p.read(func(st *addressing.State) {
		var a netip.Addr
		if a, err = addressing.NodeAddress(st.Vxlan, nodeID, netip.Addr{}); err == nil {
			ip, network = addressing.ToIP(a), addressing.ToIPNet(st.Vxlan)
		}
	})
	return ip, network, err
}

// HostInterconnectIPInVPP implements API.
func (p *Plugin) HostInterconnectIPInVPP() (ip net.IP) {
	p.read(func(st *addressing.State) { ip = addressing.ToIP(st.HostVPP) })
	return ip
}

// HostInterconnectIPInLinux implements API.
func (p *Plugin) HostInterconnectIPInLinux() (ip net.IP) {
	p.read(func(st *addressing.State) { ip = addressing.ToIP(st.HostLnx) })
	return ip
}

// HostInterconnectSubnetThisNode implements API.
func (p *Plugin) HostInterconnectSubnetThisNode() (n *net.IPNet) {
	p.read(func(st *addressing.State) { n = addressing.ToIPNet(st.HostThis) })
	return n
}

// HostInterconnectSubnetAllNodes implements API.
func (p *Plugin) HostInterconnectSubnetAllNodes() (n *net.IPNet) {
	p.read(func(st *addressing.State) { n = addressing.ToIPNet(st.HostAll) })
	return n
}

// HostInterconnectSubnetOtherNode implements API.
func (p *Plugin) HostInterconnectSubnetOtherNode(nodeID uint32) (n *net.IPNet, err error) {
	err = keeper.ErrNotReady
	p.read(func(st *addressing.State) {
		var sub netip.Prefix
		if sub, err = addressing.Dissect(st.HostAll, st.HostThis.Bits(), nodeID); err == nil {
			n = addressing.ToIPNet(sub)
		}
	})
	return n, err
}

// PodSubnetAllNodes implements API.
func (p *Plugin) PodSubnetAllNodes() (n *net.IPNet) {
	p.read(func(st *addressing.State) { n = addressing.ToIPNet(st.PodAll) })
	return n
}

// PodSubnetThisNode implements API.
func (p *Plugin) PodSubnetThisNode() (n *net.IPNet) {
	p.read(func(st *addressing.State) { n = addressing.ToIPNet(st.PodThis) })
	return n
}

// PodSubnetOtherNode implements API.
func (p *Plugin) PodSubnetOtherNode(nodeID uint32) (n *net.IPNet, err error) {
	err = keeper.ErrNotReady
	p.read(func(st *addressing.State) {
		var sub netip.Prefix
		if sub, err = addressing.Dissect(st.PodAll, st.PodThis.Bits(), nodeID); err == nil {
			n = addressing.ToIPNet(sub)
		}
	})
	return n, err
}

// ServiceNetwork implements API.
func (p *Plugin) ServiceNetwork() (n *net.IPNet) {
	p.read(func(st *addressing.State) { n = addressing.ToIPNet(st.Service) })
	return n
}

// PodGatewayIP implements API.
func (p *Plugin) PodGatewayIP() (ip net.IP) {
	p.read(func(st *addressing.State) { ip = addressing.ToIP(st.PodGW) })
	return ip
}

// NatLoopbackIP implements API.
func (p *Plugin) NatLoopbackIP() (ip net.IP) {
	p.read(func(st *addressing.State) { ip = addressing.ToIP(st.NatLoop) })
	return ip
}

// NodeIDFromPodIP implements API.
func (p *Plugin) NodeIDFromPodIP(podIP net.IP) (id uint32, err error) {
	err = keeper.ErrNotReady
	p.read(func(st *addressing.State) {
		a, ok := addressing.ToAddr(podIP)
		if !ok {
			err = fmt.Errorf("pod IP %q is not an IP address", podIP)
			return
		}
		id, err = addressing.NodeIDOf(st.PodAll, st.PodThis.Bits(), a)
	})
	return id, err
}

// notReady says why IPAM has no addressing yet.
func (p *Plugin) notReady() error {
	if w := p.waiting.Load(); w != nil {
		return fmt.Errorf("%w: %w", keeper.ErrNotReady, w)
	}
	return keeper.ErrNotReady
}
