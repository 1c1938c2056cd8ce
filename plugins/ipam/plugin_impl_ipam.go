package ipam

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"

	"github.com/contiv-ipam/agent/infra"
	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/infra/metrics"
	"github.com/contiv-ipam/agent/infra/rest"
	"github.com/contiv-ipam/agent/infra/servicelabel"
	"github.com/contiv-ipam/agent/plugins/contivconf"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ipam/ipalloc"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/nodesync"
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
	// EventLoop receives PodCIDRChange events.
	EventLoop api.EventLoop
	// LocalDB keeps the pod allocations (bolt); nil keeps them in memory
	// only (tests).
	LocalDB kvdb.Broker
	HTTP    rest.HTTPHandlers // optional
	Metrics metrics.API       // optional
}

// Plugin is the IPAM plugin.
type Plugin struct {
	Deps

	mu      sync.RWMutex
	st      *state // nil before the first resync
	metrics *ipamMetrics
}

// state is everything derived at a resync.
type state struct {
	nodeID   uint32
	nodeName string
	cfg      *contivconf.IPAMConfig
	gateway  netip.Addr // static default gateway, excluded from node IPs

	podAll, podThis   netip.Prefix
	podGW, natLoop    netip.Addr
	hostAll, hostThis netip.Prefix
	hostVPP, hostLnx  netip.Addr
	nodeIC, vxlan     netip.Prefix // nodeIC invalid when undefined
	service           netip.Prefix

	pool *ipalloc.Keyed[podmodel.ID]
	// external holds the addresses recorded in external IPAM mode.
	external map[podmodel.ID]netip.Addr
}

var (
	_ infra.Plugin     = (*Plugin)(nil)
	_ api.EventHandler = (*Plugin)(nil)
	_ API              = (*Plugin)(nil)
)

// Init checks the dependencies and registers REST handlers and metrics.
// Addresses are computed at the first resync.
func (p *Plugin) Init() error {
	switch {
	case p.ContivConf == nil:
		return errors.New("ipam needs ContivConf")
	case p.NodeSync == nil:
		return errors.New("ipam needs NodeSync")
	case p.ServiceLabel == nil:
		return errors.New("ipam needs ServiceLabel")
	}
	if p.LocalDB == nil {
		p.Log.Warn("no LocalDB: pod allocations are kept in memory only")
	}
	p.metrics = newIPAMMetrics(p)
	if p.Metrics != nil {
		if err := p.Metrics.Register(p.metrics); err != nil {
			return fmt.Errorf("registering ipam metrics: %w", err)
		}
	}
	if p.HTTP != nil {
		p.registerHandlers()
	}
	return nil
}

// Close does nothing: allocations are durable as they are made.
func (p *Plugin) Close() error { return nil }

// read runs fn with the state under the read lock; fn is not called
// before the first resync.
func (p *Plugin) read(fn func(st *state)) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.st != nil {
		fn(p.st)
	}
}

// NodeIPAddress implements API.
func (p *Plugin) NodeIPAddress(nodeID uint32) (ip net.IP, network *net.IPNet, err error) {
	err = errNotReady
	p.read(func(st *state) {
		if !st.nodeIC.IsValid() {
			err = fmt.Errorf("nodeInterconnectCIDR is undefined: %w", ErrUndefined)
			return
		}
		var a netip.Addr
		if a, err = nodeAddress(st.nodeIC, nodeID, st.gateway); err == nil {
			ip, network = toIP(a), toIPNet(st.nodeIC)
		}
	})
	return ip, network, err
}

// VxlanIPAddress implements API.
func (p *Plugin) VxlanIPAddress(nodeID uint32) (ip net.IP, network *net.IPNet, err error) {
	err = errNotReady
	p.read(func(st *state) {
		var a netip.Addr
		if a, err = nodeAddress(st.vxlan, nodeID, netip.Addr{}); err == nil {
			ip, network = toIP(a), toIPNet(st.vxlan)
		}
	})
	return ip, network, err
}

// HostInterconnectIPInVPP implements API.
func (p *Plugin) HostInterconnectIPInVPP() (ip net.IP) {
	p.read(func(st *state) { ip = toIP(st.hostVPP) })
	return ip
}

// HostInterconnectIPInLinux implements API.
func (p *Plugin) HostInterconnectIPInLinux() (ip net.IP) {
	p.read(func(st *state) { ip = toIP(st.hostLnx) })
	return ip
}

// HostInterconnectSubnetThisNode implements API.
func (p *Plugin) HostInterconnectSubnetThisNode() (n *net.IPNet) {
	p.read(func(st *state) { n = toIPNet(st.hostThis) })
	return n
}

// HostInterconnectSubnetAllNodes implements API.
func (p *Plugin) HostInterconnectSubnetAllNodes() (n *net.IPNet) {
	p.read(func(st *state) { n = toIPNet(st.hostAll) })
	return n
}

// HostInterconnectSubnetOtherNode implements API.
func (p *Plugin) HostInterconnectSubnetOtherNode(nodeID uint32) (n *net.IPNet, err error) {
	err = errNotReady
	p.read(func(st *state) {
		var sub netip.Prefix
		if sub, err = dissect(st.hostAll, st.hostThis.Bits(), nodeID); err == nil {
			n = toIPNet(sub)
		}
	})
	return n, err
}

// PodSubnetAllNodes implements API.
func (p *Plugin) PodSubnetAllNodes() (n *net.IPNet) {
	p.read(func(st *state) { n = toIPNet(st.podAll) })
	return n
}

// PodSubnetThisNode implements API.
func (p *Plugin) PodSubnetThisNode() (n *net.IPNet) {
	p.read(func(st *state) { n = toIPNet(st.podThis) })
	return n
}

// PodSubnetOtherNode implements API.
func (p *Plugin) PodSubnetOtherNode(nodeID uint32) (n *net.IPNet, err error) {
	err = errNotReady
	p.read(func(st *state) {
		var sub netip.Prefix
		if sub, err = dissect(st.podAll, st.podThis.Bits(), nodeID); err == nil {
			n = toIPNet(sub)
		}
	})
	return n, err
}

// ServiceNetwork implements API.
func (p *Plugin) ServiceNetwork() (n *net.IPNet) {
	p.read(func(st *state) { n = toIPNet(st.service) })
	return n
}

// PodGatewayIP implements API.
func (p *Plugin) PodGatewayIP() (ip net.IP) {
	p.read(func(st *state) { ip = toIP(st.podGW) })
	return ip
}

// NatLoopbackIP implements API.
func (p *Plugin) NatLoopbackIP() (ip net.IP) {
	p.read(func(st *state) { ip = toIP(st.natLoop) })
	return ip
}

// NodeIDFromPodIP implements API.
func (p *Plugin) NodeIDFromPodIP(podIP net.IP) (id uint32, err error) {
	err = errNotReady
	p.read(func(st *state) {
		a, ok := toAddr(podIP)
		if !ok {
			err = fmt.Errorf("pod IP %q is not an IP address", podIP)
			return
		}
		id, err = nodeIDOf(st.podAll, st.podThis.Bits(), a)
	})
	return id, err
}

// errNotReady is returned before the first resync.
var errNotReady = errors.New("IPAM is not initialised yet: no resync processed")
