package nodeipam

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// Defaults of the nodeIPAM section of ksr.conf.
const (
	DefaultNodeCIDRMaskSizeIPv4 = 24
	DefaultNodeCIDRMaskSizeIPv6 = 64
	DefaultResync               = 30 * time.Second
	DefaultMaxBackoff           = 10 * time.Second
	DefaultInitialRetry         = 250 * time.Millisecond
	DefaultWorkers              = 10
	DefaultClaimPrefix          = "/contiv-ksr/nodeipam/claims/"
	DefaultCloudPrefix          = "/contiv-ksr/nodeipam/cloud/"
)

// Config is the nodeIPAM section of ksr.conf: which allocator hands the
// Nodes their pod CIDRs, from which ranges, and the timing of the sync
// loops.
type Config struct {
	// Enabled makes contiv-ksr's leader run the allocator.
	Enabled bool `json:"enabled"`
	// AllocatorType is RangeAllocator, CloudAllocator, IPAMFromCluster
	// or IPAMFromCloud.
	AllocatorType CIDRAllocatorType `json:"allocatorType"`
	// ClusterCIDRs are the ranges the node CIDRs are cut from: at most one
	// IPv4 and one IPv6 (dual-stack). Required by RangeAllocator and
	// IPAMFromCluster; the others use them, when given, to check the
	// cloud's ranges.
	ClusterCIDRs []string `json:"clusterCIDRs"`
	// ServiceCIDR and SecondaryServiceCIDR are never handed out: the
	// blocks that overlap them are excluded.
	ServiceCIDR          string `json:"serviceCIDR"`
	SecondaryServiceCIDR string `json:"secondaryServiceCIDR"`
	// NodeCIDRMaskSizeIPv4 and NodeCIDRMaskSizeIPv6 are the lengths of the
	// node CIDRs of each family.
	NodeCIDRMaskSizeIPv4 int `json:"nodeCIDRMaskSizeIPv4"`
	NodeCIDRMaskSizeIPv6 int `json:"nodeCIDRMaskSizeIPv6"`
	// Resync, MaxBackoff and InitialRetry time the per-node sync loops
	// (see Timeout) and the retries of a node that could not be given a
	// CIDR.
	Resync       time.Duration `json:"resync"`
	MaxBackoff   time.Duration `json:"maxBackoff"`
	InitialRetry time.Duration `json:"initialRetry"`
	// Workers is the number of nodes handled at once.
	Workers int `json:"workers"`
	// ClaimPrefix is the etcd prefix of the claims: the CIDRs handed to a
	// node, recorded before the node is patched, until it holds them.
	ClaimPrefix string `json:"claimPrefix"`
	// CloudPrefix is the etcd prefix of the etcd-backed Cloud: one key per
	// node, holding its ranges.
	CloudPrefix string `json:"cloudPrefix"`
}

// DefaultConfig returns the defaults: disabled, RangeAllocator, /24 and
// /64 per node.
func DefaultConfig() Config {
	return Config{
		AllocatorType:        RangeAllocatorType,
		NodeCIDRMaskSizeIPv4: DefaultNodeCIDRMaskSizeIPv4,
		NodeCIDRMaskSizeIPv6: DefaultNodeCIDRMaskSizeIPv6,
		Resync:               DefaultResync,
		MaxBackoff:           DefaultMaxBackoff,
		InitialRetry:         DefaultInitialRetry,
		Workers:              DefaultWorkers,
		ClaimPrefix:          DefaultClaimPrefix,
		CloudPrefix:          DefaultCloudPrefix,
	}
}

// Ranges is a validated Config: the parsed ranges.
type Ranges struct {
	// Clusters are the cluster ranges, masked, in the order of the config.
	Clusters []netip.Prefix
	// MaskSizes are the node mask sizes, one per cluster range.
	MaskSizes []int
	// Services are the service ranges (zero, one or two).
	Services []netip.Prefix
}

// Validate names every bad key and its value.
func (c *Config) Validate() error {
	_, err := c.Ranges()
	return err
}

// Ranges parses and checks the config.
func (c *Config) Ranges() (Ranges, error) {
	var r Ranges
	errs := c.checkScalars()
	for i, s := range c.ClusterCIDRs {
		p, err := c.parseCluster(i, s, r.Clusters)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		r.Clusters = append(r.Clusters, p)
		r.MaskSizes = append(r.MaskSizes, c.maskSize(p))
	}
	if len(c.ClusterCIDRs) > 2 {
		errs = append(errs, fmt.Errorf("clusterCIDRs %v: want at most two (one IPv4, one IPv6)", c.ClusterCIDRs))
	}
	if c.AllocatorType.needsClusterCIDRs() && c.Enabled && len(c.ClusterCIDRs) == 0 {
		errs = append(errs, fmt.Errorf("clusterCIDRs: %s needs at least one", c.AllocatorType))
	}
	for _, f := range []struct{ key, value string }{{"serviceCIDR", c.ServiceCIDR}, {"secondaryServiceCIDR", c.SecondaryServiceCIDR}} {
		if f.value == "" {
			continue
		}
		p, err := netip.ParsePrefix(f.value)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %q: not a CIDR", f.key, f.value))
			continue
		}
		r.Services = append(r.Services, p.Masked())
	}
	if err := errors.Join(errs...); err != nil {
		return Ranges{}, err
	}
	return r, nil
}

func (c *Config) checkScalars() []error {
	var errs []error
	if !c.AllocatorType.valid() {
		errs = append(errs, fmt.Errorf("allocatorType %q: want %s, %s, %s or %s", c.AllocatorType,
			RangeAllocatorType, CloudAllocatorType, IPAMFromClusterAllocatorType, IPAMFromCloudAllocatorType))
	}
	if c.NodeCIDRMaskSizeIPv4 < 1 || c.NodeCIDRMaskSizeIPv4 > 32 {
		errs = append(errs, fmt.Errorf("nodeCIDRMaskSizeIPv4 %d: want 1 to 32", c.NodeCIDRMaskSizeIPv4))
	}
	if c.NodeCIDRMaskSizeIPv6 < 1 || c.NodeCIDRMaskSizeIPv6 > 128 {
		errs = append(errs, fmt.Errorf("nodeCIDRMaskSizeIPv6 %d: want 1 to 128", c.NodeCIDRMaskSizeIPv6))
	}
	if c.Resync < time.Second {
		errs = append(errs, fmt.Errorf("resync %s: want at least 1s", c.Resync))
	}
	if c.InitialRetry <= 0 {
		errs = append(errs, fmt.Errorf("initialRetry %s: want more than 0", c.InitialRetry))
	}
	if c.MaxBackoff < c.InitialRetry {
		errs = append(errs, fmt.Errorf("maxBackoff %s: want at least initialRetry (%s)", c.MaxBackoff, c.InitialRetry))
	}
	if c.Workers < 1 || c.Workers > 100 {
		errs = append(errs, fmt.Errorf("workers %d: want 1 to 100", c.Workers))
	}
	for _, f := range []struct{ key, value string }{{"claimPrefix", c.ClaimPrefix}, {"cloudPrefix", c.CloudPrefix}} {
		if !strings.HasPrefix(f.value, "/") || !strings.HasSuffix(f.value, "/") || len(f.value) < 2 {
			errs = append(errs, fmt.Errorf("%s %q: want an etcd prefix that starts and ends with \"/\"", f.key, f.value))
		}
	}
	return errs
}

// parseCluster parses clusterCIDRs[i] and checks it against the ones
// before it and its node mask size.
func (c *Config) parseCluster(i int, s string, before []netip.Prefix) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("clusterCIDRs[%d] %q: not a CIDR", i, s)
	}
	p = p.Masked()
	for _, b := range before {
		if b.Addr().Is4() == p.Addr().Is4() {
			return netip.Prefix{}, fmt.Errorf("clusterCIDRs[%d] %q: a second %s range (the first is %s)", i, s, family(p), b)
		}
	}
	size, key := c.maskSize(p), "nodeCIDRMaskSizeIPv4"
	if p.Addr().Is6() {
		key = "nodeCIDRMaskSizeIPv6"
	}
	if size < p.Bits() || size-p.Bits() > MaxIndexBits {
		return netip.Prefix{}, fmt.Errorf("%s %d for clusterCIDRs[%d] %s: want %d to %d",
			key, size, i, p, p.Bits(), min(p.Bits()+MaxIndexBits, p.Addr().BitLen()))
	}
	return p, nil
}

// maskSize is the node mask size of p's family.
func (c *Config) maskSize(p netip.Prefix) int {
	if p.Addr().Is4() {
		return c.NodeCIDRMaskSizeIPv4
	}
	return c.NodeCIDRMaskSizeIPv6
}

// family names p's address family.
func family(p netip.Prefix) string {
	if p.Addr().Is4() {
		return "IPv4"
	}
	return "IPv6"
}
