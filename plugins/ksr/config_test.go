package ksr

import (
	"os"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/config"
)

// The sample ksr.conf lists every key with its default.
func TestSampleConfigIsTheDefault(t *testing.T) {
	g := NewWithT(t)
	data, err := os.ReadFile("ksr.conf")
	g.Expect(err).NotTo(HaveOccurred())
	got := DefaultConfig()
	g.Expect(config.Decode(data, &got, "ksr.conf")).To(Succeed())
	g.Expect(got.NodeIPAM.ClusterCIDRs).To(BeEmpty())
	got.NodeIPAM.ClusterCIDRs = nil
	g.Expect(got.PoolBlocks.ClusterCIDRs).To(BeEmpty())
	got.PoolBlocks.ClusterCIDRs = nil
	g.Expect(got).To(Equal(DefaultConfig()))
	g.Expect(got.Validate()).To(Succeed())
}

// A bad nodeIPAM key is named in full, with its value.
func TestNodeIPAMConfigErrorsNameTheKey(t *testing.T) {
	cases := []struct{ name, conf, want string }{
		{"bad cluster CIDR", "nodeIPAM: {enabled: true, clusterCIDRs: [10.0.0.0/33]}", `nodeIPAM.clusterCIDRs[0] "10.0.0.0/33"`},
		{"enabled without ranges", "nodeIPAM: {enabled: true}", "nodeIPAM.clusterCIDRs"},
		{"two IPv4 ranges", "nodeIPAM: {clusterCIDRs: [10.0.0.0/16, 10.1.0.0/16]}", "nodeIPAM.clusterCIDRs[1]"},
		{"mask too short", "nodeIPAM: {clusterCIDRs: [10.0.0.0/16], nodeCIDRMaskSizeIPv4: 8}", "nodeIPAM.nodeCIDRMaskSizeIPv4 8"},
		{"bad type", "nodeIPAM: {allocatorType: Magic}", `nodeIPAM.allocatorType "Magic"`},
		{"bad backoff", "nodeIPAM: {maxBackoff: 1ms}", "nodeIPAM.maxBackoff 1ms"},
		{"unknown key", "nodeIPAM: {clusterCIDR: 10.0.0.0/16}", "clusterCIDR"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			cfg := DefaultConfig()
			err := config.Decode([]byte(c.conf+"\n"), &cfg, "ksr.conf")
			if err == nil {
				err = cfg.Validate()
			}
			g.Expect(err).To(HaveOccurred())
			g.Expect(strings.ReplaceAll(err.Error(), "\n", " ")).To(ContainSubstring(c.want))
		})
	}
}
