package nodeipam

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestPoolBlockConfigValidate(t *testing.T) {
	node := DefaultConfig()
	node.ClusterCIDRs = []string{"10.1.0.0/16", "fd00:10::/56"}
	node.ServiceCIDR = "10.96.0.0/12"
	for _, tc := range []struct {
		name    string
		change  func(c *PoolBlockConfig)
		wantErr []string // substrings, each naming a key and its value
	}{
		{name: "defaults: off", change: func(*PoolBlockConfig) {}},
		{name: "IPv4", change: func(c *PoolBlockConfig) { c.ClusterCIDRs = []string{"10.64.0.0/16"} }},
		{name: "dual-stack", change: func(c *PoolBlockConfig) { c.ClusterCIDRs = []string{"fd00:64::/104", "10.64.0.0/16"} }},
		{name: "host bits are masked", change: func(c *PoolBlockConfig) { c.ClusterCIDRs = []string{"10.64.0.1/16"} }},
		{name: "not a CIDR", change: func(c *PoolBlockConfig) { c.ClusterCIDRs = []string{"10.64.0.0"} },
			wantErr: []string{`clusterCIDRs[0] "10.64.0.0": not a CIDR`}},
		{name: "two IPv4 ranges", change: func(c *PoolBlockConfig) { c.ClusterCIDRs = []string{"10.64.0.0/16", "10.65.0.0/16"} },
			wantErr: []string{`clusterCIDRs[1] "10.65.0.0/16": a second IPv4 range (the first is 10.64.0.0/16)`}},
		{name: "three ranges", change: func(c *PoolBlockConfig) { c.ClusterCIDRs = []string{"10.64.0.0/16", "fd00::/120", "10.65.0.0/16"} },
			wantErr: []string{`clusterCIDRs ["10.64.0.0/16" "fd00::/120" "10.65.0.0/16"]: want at most two`}},
		{name: "IPv4 block larger than the range", change: func(c *PoolBlockConfig) {
			c.ClusterCIDRs, c.BlockSizeIPv4 = []string{"10.64.0.0/24"}, 20
		}, wantErr: []string{"blockSizeIPv4 20 for clusterCIDRs[0] 10.64.0.0/24: want 24 to 32"}},
		{name: "IPv6 blocks beyond 64 bits of index", change: func(c *PoolBlockConfig) { c.ClusterCIDRs = []string{"fd00::/48"} },
			wantErr: []string{"blockSizeIPv6 120 for clusterCIDRs[0] fd00::/48: want 48 to 112"}},
		{name: "block sizes out of bounds", change: func(c *PoolBlockConfig) { c.BlockSizeIPv4, c.BlockSizeIPv6 = 33, 0 },
			wantErr: []string{"blockSizeIPv4 33: want 1 to 32", "blockSizeIPv6 0: want 1 to 128"}},
		{name: "maxBlocksPerNode 0", change: func(c *PoolBlockConfig) { c.MaxBlocksPerNode = 0 },
			wantErr: []string{"maxBlocksPerNode 0: want 1 to 1024"}},
		{name: "maxBlocksPerNode too large", change: func(c *PoolBlockConfig) { c.MaxBlocksPerNode = 5000 },
			wantErr: []string{"maxBlocksPerNode 5000: want 1 to 1024"}},
		{name: "overlaps the node CIDR ranges", change: func(c *PoolBlockConfig) { c.ClusterCIDRs = []string{"10.0.0.0/8", "fd00:10:0:ff::/120"} },
			wantErr: []string{`clusterCIDRs[0] "10.0.0.0/8": overlaps nodeIPAM.clusterCIDRs[0] "10.1.0.0/16"`,
				`clusterCIDRs[0] "10.0.0.0/8": overlaps nodeIPAM.serviceCIDR "10.96.0.0/12"`,
				`clusterCIDRs[1] "fd00:10:0:ff::/120": overlaps nodeIPAM.clusterCIDRs[1] "fd00:10::/56"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			c := DefaultPoolBlockConfig()
			tc.change(&c)
			err := c.ValidateWith(node)
			if tc.wantErr == nil {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(c.Validate()).To(Succeed())
				return
			}
			g.Expect(err).To(HaveOccurred())
			for _, want := range tc.wantErr {
				g.Expect(err.Error()).To(ContainSubstring(want))
			}
		})
	}
}

func TestPoolBlockConfigDefaults(t *testing.T) {
	g := NewWithT(t)
	c := DefaultPoolBlockConfig()
	g.Expect(c.Enabled()).To(BeFalse(), "off while clusterCIDRs is empty")
	g.Expect(c.BlockSizeIPv4).To(Equal(26))
	g.Expect(c.BlockSizeIPv6).To(Equal(120))
	g.Expect(c.MaxBlocksPerNode).To(Equal(8))
	_, err := NewPoolBlockServer(PoolBlockParams{Config: c})
	g.Expect(err).To(HaveOccurred())
}
