package contivconf

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"

	"github.com/contiv-ipam/agent/infra"
	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/health"
	"github.com/contiv-ipam/agent/infra/metrics"
	"github.com/contiv-ipam/agent/infra/servicelabel"
	"github.com/contiv-ipam/agent/plugins/controller/api"
)

// Deps are the plugin's dependencies.
type Deps struct {
	infra.PluginDeps
	// ServiceLabel gives this node's name (its agent label); required.
	ServiceLabel servicelabel.ReaderAPI
	// Metrics counts the NodeConfig CRD values that could not be used
	// (optional).
	Metrics metrics.API
	// StatusCheck hears that the plugin waits for a valid NodeConfig CRD
	// (optional).
	StatusCheck health.Reporter
}

// Plugin reads contiv.conf in Init and serves it through API. As an event
// handler it follows this node's NodeConfig CRD (when enabled).
type Plugin struct {
	Deps

	fixedConf *Config // from UseConf

	// Set by LoadConfig (or by Init when LoadConfig was not called), on
	// the agent's start goroutine; read-only after Init.
	conf   Config
	parsed *Parsed
	source string // where conf came from: the file, "UseConf" or "defaults"

	// Set by Init, read-only afterwards.
	nodeName string
	fileNode *NodeConfig // this node's nodeConfig entry, nil if none

	report reporting // set by Init

	mu      sync.RWMutex
	crdNode *NodeConfig // this node's NodeConfig CRD, nil if none
	gw      netip.Addr  // GetStaticDefaultGW, recomputed with crdNode
}

var (
	_ infra.Plugin       = (*Plugin)(nil)
	_ infra.ConfigLoader = (*Plugin)(nil)
	_ API                = (*Plugin)(nil)
	_ api.EventHandler   = (*Plugin)(nil)
)

// LoadConfig loads and validates contiv.conf (or the UseConf config)
// before any plugin's Init; every problem of the file is reported at once,
// prefixed with the file name. It reads nothing but the file.
func (p *Plugin) LoadConfig() error {
	c, source, err := p.loadConfig()
	if err != nil {
		return err
	}
	parsed, err := Parse(&c)
	if err != nil {
		return fmt.Errorf("config %s: %w", source, err)
	}
	p.conf, p.parsed, p.source = c, parsed, source
	return nil
}

// Init applies the config LoadConfig loaded (loading it now when
// LoadConfig was not called) to this node: its nodeConfig entry and its
// static default gateway.
func (p *Plugin) Init() error {
	if p.ServiceLabel == nil {
		return errors.New("contivconf needs ServiceLabel (this node's name)")
	}
	if p.parsed == nil {
		if err := p.LoadConfig(); err != nil {
			return err
		}
	}
	c, parsed, source := p.conf, p.parsed, p.source
	p.nodeName = p.ServiceLabel.GetAgentLabel()
	for i := range c.NodeConfig {
		if c.NodeConfig[i].NodeName == p.nodeName {
			p.fileNode = cloneNodeConfig(&c.NodeConfig[i])
		}
	}
	p.mu.Lock()
	p.gw = staticDefaultGW(&p.parsed.IPAM, p.effectiveNode())
	p.mu.Unlock()
	if err := p.initReporting(); err != nil {
		return err
	}
	ipam := &parsed.IPAM
	p.Log.Info("contiv.conf loaded", "source", source, "node", p.nodeName,
		"podSubnetCIDR", ipam.PodSubnetCIDR.String(), "podSubnetOneNodePrefixLen", ipam.PodSubnetOneNodePrefixLen,
		"vppHostSubnetCIDR", ipam.VPPHostSubnetCIDR.String(), "nodeInterconnectCIDR", orNone(ipam.NodeInterconnectCIDR),
		"vxlanCIDR", ipam.VxlanCIDR.String(), "serviceCIDR", ipam.ServiceCIDR.String(),
		"nodeConfig", p.fileNode != nil, "crdNodeConfiguration", !c.CRDNodeConfigurationDisabled)
	if s := ipam.Second; s != nil {
		p.Log.Info("contiv.conf dual stack", "podSubnetCIDR", s.PodSubnetCIDR.String(),
			"podSubnetOneNodePrefixLen", s.PodSubnetOneNodePrefixLen, "vppHostSubnetCIDR", s.VPPHostSubnetCIDR.String(),
			"nodeInterconnectCIDR", orNone(s.NodeInterconnectCIDR), "vxlanCIDR", s.VxlanCIDR.String(),
			"serviceCIDR", s.ServiceCIDR.String())
	}
	for _, e := range ipam.Exclusions {
		p.Log.Info("contiv.conf excludes pod addresses", "cidr", e.Prefix.String(), "owner", e.Owner)
	}
	return nil
}

// loadConfig returns the config (defaults, then the file over them) and
// the name of its source.
func (p *Plugin) loadConfig() (Config, string, error) {
	if p.fixedConf != nil {
		return cloneConfig(p.fixedConf), "UseConf", nil
	}
	c := DefaultConfig()
	if p.Cfg == nil {
		return c, "defaults", nil
	}
	if _, err := p.Cfg.LoadValue(&c); err != nil {
		return Config{}, "", err
	}
	return c, config.SourceName(p.Cfg), nil
}

// Close does nothing.
func (p *Plugin) Close() error { return nil }

// GetIPAMConfig returns a copy of the effective IPAM configuration.
func (p *Plugin) GetIPAMConfig() *IPAMConfig {
	if p.parsed == nil {
		return nil
	}
	return cloneIPAMConfig(&p.parsed.IPAM)
}

// GetIPAMConfigForJSON returns a copy of the ipamConfig block as read,
// defaults filled in.
func (p *Plugin) GetIPAMConfigForJSON() *IPAMConfigJSON {
	if p.parsed == nil {
		return nil
	}
	c := p.conf.IPAMConfig.clone()
	return &c
}

// GetSRv6Config returns a copy of the parsed ipamConfig.srv6 block. It is
// not part of API (nothing here uses SRv6); IPAM's SID helpers may.
func (p *Plugin) GetSRv6Config() *SRv6Config {
	if p.parsed == nil {
		return nil
	}
	s := p.parsed.SRv6
	return &s
}

// GetConfig returns a copy of the whole contiv.conf as loaded (defaults
// filled in).
func (p *Plugin) GetConfig() *Config {
	c := cloneConfig(&p.conf)
	return &c
}

// GetStaticDefaultGW returns this node's static default gateway: the zero
// Addr when DHCP is used (nodeInterconnectDHCP or this node's
// mainVPPInterface.useDHCP, unless its mainVPPInterface.ip is set); else
// this node's gateway; else ipamConfig.defaultGateway; else the zero Addr.
func (p *Plugin) GetStaticDefaultGW() netip.Addr {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.gw
}

// GetNodeConfig returns a copy of this node's configuration: its NodeConfig
// CRD when CRD node configuration is enabled and one exists, else its
// nodeConfig entry in contiv.conf, else nil.
func (p *Plugin) GetNodeConfig() *NodeConfig {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return cloneNodeConfig(p.effectiveNode())
}

// NodeName returns this node's name (the agent label) as read in Init.
func (p *Plugin) NodeName() string { return p.nodeName }

// effectiveNode is the CRD entry, else the file entry. Hold p.mu.
func (p *Plugin) effectiveNode() *NodeConfig {
	if p.crdNode != nil {
		return p.crdNode
	}
	return p.fileNode
}

// staticDefaultGW resolves the gateway as GetStaticDefaultGW describes.
// node has passed checkNode (the file's entries in Parse, a CRD in
// nodeConfigFromKube) before it was stored, so its gateway parses and is
// of the subnets' family: the parse below cannot fail.
func staticDefaultGW(ipam *IPAMConfig, node *NodeConfig) netip.Addr {
	dhcp := ipam.NodeInterconnectDHCP
	if node != nil {
		dhcp = dhcp || node.MainVPPInterface.UseDHCP
		if node.MainVPPInterface.IP != "" {
			dhcp = false
		}
	}
	if dhcp {
		return netip.Addr{}
	}
	if node != nil && node.Gateway != "" {
		if a, err := netip.ParseAddr(node.Gateway); err == nil {
			return a
		}
	}
	return ipam.DefaultGateway
}

// orNone is p as text, "none" when p is invalid (undefined).
func orNone(p netip.Prefix) string {
	if !p.IsValid() {
		return "none"
	}
	return p.String()
}

// cloneNodeConfig deep-copies n (nil stays nil).
func cloneNodeConfig(n *NodeConfig) *NodeConfig {
	if n == nil {
		return nil
	}
	out := *n
	out.OtherVPPInterfaces = slices.Clone(n.OtherVPPInterfaces)
	return &out
}

// cloneIPAMConfig deep-copies c (Second and Exclusions included).
func cloneIPAMConfig(c *IPAMConfig) *IPAMConfig {
	out := *c
	if c.Second != nil {
		s := *c.Second
		out.Second = &s
	}
	out.Exclusions = slices.Clone(c.Exclusions)
	return &out
}

// cloneConfig deep-copies c.
func cloneConfig(c *Config) Config {
	out := *c
	out.IPAMConfig = c.IPAMConfig.clone()
	out.NodeConfig = make([]NodeConfig, len(c.NodeConfig))
	for i := range c.NodeConfig {
		out.NodeConfig[i] = *cloneNodeConfig(&c.NodeConfig[i])
	}
	if c.NodeConfig == nil {
		out.NodeConfig = nil
	}
	return out
}
