package nodeipam

import (
	"errors"
	"fmt"
	"net/netip"
)

// Defaults of the poolBlocks section of ksr.conf.
const (
	DefaultPoolBlockSizeIPv4    = 26
	DefaultPoolBlockSizeIPv6    = 120
	DefaultMaxPoolBlocksPerNode = 8
	// MaxPoolBlocksPerNode bounds maxBlocksPerNode: a grant of that many
	// blocks of both families stays far below etcd's value limit.
	MaxPoolBlocksPerNode = 1024
	// DefaultPoolBlockGenerationKey is the etcd key every grant write of
	// the PoolBlockServer bumps (see PoolBlockServer): outside
	// codec.KSRPrefix, which the agents decode.
	DefaultPoolBlockGenerationKey = "/contiv-ksr/nodeipam/poolblocks/generation"
)

// PoolBlockConfig is the poolBlocks section of ksr.conf: the ranges the
// added pod-address blocks of the agents' elastic pools are cut from
// (poolblock.Claim, poolblock.Grant). The server is off while
// ClusterCIDRs is empty.
type PoolBlockConfig struct {
	// ClusterCIDRs are the ranges the blocks are cut from: at most one
	// IPv4 and one IPv6. They must overlap neither the node CIDR ranges
	// (nodeIPAM.clusterCIDRs, or kube-controller-manager's
	// --cluster-cidr), nor the service ranges, nor the agents'
	// ipamConfig.podSubnetCIDR (which contiv-ksr cannot see).
	ClusterCIDRs []string `json:"clusterCIDRs"`
	// BlockSizeIPv4 and BlockSizeIPv6 are the prefix lengths of a block.
	BlockSizeIPv4 int `json:"blockSizeIPv4"`
	BlockSizeIPv6 int `json:"blockSizeIPv6"`
	// MaxBlocksPerNode caps the added blocks a node holds per family,
	// whatever it wants.
	MaxBlocksPerNode int `json:"maxBlocksPerNode"`
}

// DefaultPoolBlockConfig returns the defaults: off, /26 and /120 blocks,
// 8 per node and family.
func DefaultPoolBlockConfig() PoolBlockConfig {
	return PoolBlockConfig{
		BlockSizeIPv4:    DefaultPoolBlockSizeIPv4,
		BlockSizeIPv6:    DefaultPoolBlockSizeIPv6,
		MaxBlocksPerNode: DefaultMaxPoolBlocksPerNode,
	}
}

// Enabled tells whether there is a range to cut blocks from.
func (c *PoolBlockConfig) Enabled() bool { return len(c.ClusterCIDRs) > 0 }

// Validate names every bad key and its value.
func (c *PoolBlockConfig) Validate() error {
	_, err := c.Ranges()
	return err
}

// ValidateWith is Validate plus the check that no range overlaps the node
// CIDR ranges or the service ranges of node (the nodeIPAM section), which
// are named in full.
func (c *PoolBlockConfig) ValidateWith(node Config) error {
	ranges, err := c.Ranges()
	if err != nil {
		return err
	}
	var others []namedRange
	for i, s := range node.ClusterCIDRs {
		others = append(others, namedRange{fmt.Sprintf("nodeIPAM.clusterCIDRs[%d]", i), s})
	}
	others = append(others, namedRange{"nodeIPAM.serviceCIDR", node.ServiceCIDR},
		namedRange{"nodeIPAM.secondaryServiceCIDR", node.SecondaryServiceCIDR})
	var errs []error
	for i, p := range ranges {
		for _, o := range others {
			q, err := netip.ParsePrefix(o.value)
			if err != nil { // empty, or reported by nodeIPAM's own validation
				continue
			}
			if p.Overlaps(q.Masked()) {
				errs = append(errs, fmt.Errorf("clusterCIDRs[%d] %q: overlaps %s %q", i, c.ClusterCIDRs[i], o.key, o.value))
			}
		}
	}
	return errors.Join(errs...)
}

type namedRange struct{ key, value string }

// Ranges parses and checks the config: the ranges, masked, in the order
// of the config.
func (c *PoolBlockConfig) Ranges() ([]netip.Prefix, error) {
	var errs []error
	if c.BlockSizeIPv4 < 1 || c.BlockSizeIPv4 > 32 {
		errs = append(errs, fmt.Errorf("blockSizeIPv4 %d: want 1 to 32", c.BlockSizeIPv4))
	}
	if c.BlockSizeIPv6 < 1 || c.BlockSizeIPv6 > 128 {
		errs = append(errs, fmt.Errorf("blockSizeIPv6 %d: want 1 to 128", c.BlockSizeIPv6))
	}
	if c.MaxBlocksPerNode < 1 || c.MaxBlocksPerNode > MaxPoolBlocksPerNode {
		errs = append(errs, fmt.Errorf("maxBlocksPerNode %d: want 1 to %d", c.MaxBlocksPerNode, MaxPoolBlocksPerNode))
	}
	if len(c.ClusterCIDRs) > 2 {
		errs = append(errs, fmt.Errorf("clusterCIDRs %q: want at most two (one IPv4, one IPv6)", c.ClusterCIDRs))
	}
	var out []netip.Prefix
	for i, s := range c.ClusterCIDRs {
		p, err := c.parseRange(i, s, out)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, p)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// parseRange parses clusterCIDRs[i] and checks it against the ranges
// before it and its block size.
func (c *PoolBlockConfig) parseRange(i int, s string, before []netip.Prefix) (netip.Prefix, error) {
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
	size, key := c.blockSize(p), "blockSizeIPv4"
	if p.Addr().Is6() {
		key = "blockSizeIPv6"
	}
	if size < p.Bits() || size > p.Addr().BitLen() || size-p.Bits() > MaxIndexBits {
		return netip.Prefix{}, fmt.Errorf("%s %d for clusterCIDRs[%d] %s: want %d to %d",
			key, size, i, p, p.Bits(), min(p.Bits()+MaxIndexBits, p.Addr().BitLen()))
	}
	return p, nil
}

// blockSize is the block size of p's family.
func (c *PoolBlockConfig) blockSize(p netip.Prefix) int {
	if p.Addr().Is4() {
		return c.BlockSizeIPv4
	}
	return c.BlockSizeIPv6
}
