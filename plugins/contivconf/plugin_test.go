package contivconf

import (
	"flag"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/controller/api"
)

// fakeLabel is a servicelabel.ReaderAPI with a fixed label.
type fakeLabel string

func (l fakeLabel) GetAgentLabel() string                   { return string(l) }
func (l fakeLabel) GetAgentPrefix() string                  { return "/vnf-agent/" + string(l) + "/" }
func (l fakeLabel) GetDifferentAgentPrefix(o string) string { return "/vnf-agent/" + o + "/" }
func (l fakeLabel) GetAllAgentsPrefix() string              { return "/vnf-agent/" }

// testDeps sets the node name and a silent logger.
func testDeps(node string) Option {
	return UseDeps(func(d *Deps) {
		d.ServiceLabel = fakeLabel(node)
		d.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	})
}

// ipamFixture is the configuration of the IPAM unit tests (spec §2.15).
func ipamFixture() Config {
	c := DefaultConfig()
	c.IPAMConfig.PodSubnetCIDR = "1.2.128.0/17"
	c.IPAMConfig.PodSubnetOneNodePrefixLen = 29
	c.IPAMConfig.VPPHostSubnetCIDR = "2.3.192.0/18"
	c.IPAMConfig.VPPHostSubnetOneNodePrefixLen = 30
	c.IPAMConfig.NodeInterconnectCIDR = "3.4.5.192/26"
	c.IPAMConfig.VxlanCIDR = "4.5.6.192/26"
	return c
}

func initPlugin(t *testing.T, c Config, node string) *Plugin {
	t.Helper()
	p := NewPlugin(UseConf(c), testDeps(node))
	NewWithT(t).Expect(p.Init()).To(Succeed())
	return p
}

func TestPluginName(t *testing.T) {
	g := NewWithT(t)
	p := DefaultPlugin()
	g.Expect(p.String()).To(Equal("contivconf"))
	g.Expect(p.Close()).To(Succeed())
}

// TestExcludeGateway's configuration: the node's gateway is the static
// default gateway, an IPv4 address (not IPv4-mapped).
func TestExcludeGatewayConfig(t *testing.T) {
	g := NewWithT(t)
	c := ipamFixture()
	c.NodeConfig = []NodeConfig{{NodeName: "node", Gateway: "3.4.5.194"}}
	p := initPlugin(t, c, "node")
	gw := p.GetStaticDefaultGW()
	g.Expect(gw).To(Equal(netip.MustParseAddr("3.4.5.194")))
	g.Expect(gw.Is4()).To(BeTrue())
	g.Expect(p.GetNodeConfig()).To(Equal(&NodeConfig{NodeName: "node", Gateway: "3.4.5.194"}))
	ipam := p.GetIPAMConfig()
	g.Expect(ipam.PodSubnetCIDR.String()).To(Equal("1.2.128.0/17"))
	g.Expect(ipam.PodSubnetOneNodePrefixLen).To(BeEquivalentTo(29))
	g.Expect(ipam.NodeInterconnectCIDR.String()).To(Equal("3.4.5.192/26"))
}

func TestGetStaticDefaultGW(t *testing.T) {
	cases := []struct {
		name   string
		dhcp   bool
		defGW  string
		nodes  []NodeConfig
		wantGW netip.Addr
	}{
		{name: "none"},
		{name: "ipamConfig.defaultGateway", defGW: "3.4.5.193", wantGW: netip.MustParseAddr("3.4.5.193")},
		{name: "node gateway beats defaultGateway", defGW: "3.4.5.193",
			nodes: []NodeConfig{{NodeName: "node", Gateway: "3.4.5.194"}}, wantGW: netip.MustParseAddr("3.4.5.194")},
		{name: "another node's gateway does not apply", defGW: "3.4.5.193",
			nodes: []NodeConfig{{NodeName: "other", Gateway: "3.4.5.194"}}, wantGW: netip.MustParseAddr("3.4.5.193")},
		{name: "node without gateway falls back", defGW: "3.4.5.193",
			nodes: []NodeConfig{{NodeName: "node"}}, wantGW: netip.MustParseAddr("3.4.5.193")},
		{name: "nodeInterconnectDHCP", dhcp: true, defGW: "3.4.5.193",
			nodes: []NodeConfig{{NodeName: "node", Gateway: "3.4.5.194"}}},
		{name: "node useDHCP", defGW: "3.4.5.193",
			nodes: []NodeConfig{{NodeName: "node", Gateway: "3.4.5.194", MainVPPInterface: InterfaceConfig{UseDHCP: true}}}},
		{name: "node ip beats useDHCP", defGW: "3.4.5.193",
			nodes: []NodeConfig{{NodeName: "node", Gateway: "3.4.5.194",
				MainVPPInterface: InterfaceConfig{UseDHCP: true, IP: "3.4.5.200/26"}}}, wantGW: netip.MustParseAddr("3.4.5.194")},
		{name: "node ip beats nodeInterconnectDHCP", dhcp: true, defGW: "3.4.5.193",
			nodes: []NodeConfig{{NodeName: "node", MainVPPInterface: InterfaceConfig{IP: "3.4.5.200/26"}}}, wantGW: netip.MustParseAddr("3.4.5.193")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			c := ipamFixture()
			c.IPAMConfig.NodeInterconnectDHCP = tc.dhcp
			c.IPAMConfig.DefaultGateway = tc.defGW
			c.NodeConfig = tc.nodes
			p := initPlugin(t, c, "node")
			g.Expect(p.GetStaticDefaultGW()).To(Equal(tc.wantGW))
		})
	}
}

func TestStaticDefaultGWIPv6(t *testing.T) {
	g := NewWithT(t)
	c, err := DecodeConfig([]byte("ipamConfig: {podSubnetCIDR: 'fe10:f00d::/90', podSubnetOneNodePrefixLen: 120, "+
		"vppHostSubnetCIDR: 'fe30:f00d::/90', vppHostSubnetOneNodePrefixLen: 126, nodeInterconnectCIDR: 'fe50:f00d::/90', "+
		"vxlanCIDR: 'fe20:f00d::/120', serviceCIDR: 'fe40::/112', defaultGateway: 'fe50:f00d::1'}"), "t")
	g.Expect(err).NotTo(HaveOccurred())
	p := initPlugin(t, c, "node")
	g.Expect(p.GetStaticDefaultGW()).To(Equal(netip.MustParseAddr("fe50:f00d::1")))
	g.Expect(p.GetIPAMConfig().UseIPv6).To(BeTrue())
}

func TestGettersReturnCopies(t *testing.T) {
	g := NewWithT(t)
	c := ipamFixture()
	c.IPAMConfig.DefaultGateway = "3.4.5.193"
	c.NodeConfig = []NodeConfig{{NodeName: "node", Gateway: "3.4.5.194",
		OtherVPPInterfaces: []InterfaceConfig{{InterfaceName: "eth2"}}}}
	p := initPlugin(t, c, "node")
	c.NodeConfig[0].Gateway = "changed after UseConf" // UseConf copied c

	ipam := p.GetIPAMConfig()
	ipam.PodSubnetCIDR = netip.MustParsePrefix("99.0.0.0/8")
	ipam.DefaultGateway = netip.MustParseAddr("99.0.0.1")
	ipam.VxlanCIDR = netip.Prefix{}
	g.Expect(p.GetIPAMConfig().PodSubnetCIDR.String()).To(Equal("1.2.128.0/17"))
	g.Expect(p.GetIPAMConfig().DefaultGateway.String()).To(Equal("3.4.5.193"))
	g.Expect(p.GetIPAMConfig().VxlanCIDR.IsValid()).To(BeTrue())

	js := p.GetIPAMConfigForJSON()
	js.PodSubnetCIDR = "x"
	g.Expect(p.GetIPAMConfigForJSON().PodSubnetCIDR).To(Equal("1.2.128.0/17"))

	g.Expect(p.GetStaticDefaultGW().String()).To(Equal("3.4.5.194"))

	n := p.GetNodeConfig()
	n.OtherVPPInterfaces[0].InterfaceName = "x"
	n.Gateway = "x"
	g.Expect(p.GetNodeConfig().OtherVPPInterfaces[0].InterfaceName).To(Equal("eth2"))
	g.Expect(p.GetNodeConfig().Gateway).To(Equal("3.4.5.194"))

	s := p.GetSRv6Config()
	s.ServicePolicyBSIDSubnetCIDR = netip.Prefix{}
	g.Expect(p.GetSRv6Config().ServicePolicyBSIDSubnetCIDR.String()).To(Equal("8fff::/16"))

	all := p.GetConfig()
	all.NodeConfig[0].NodeName = "x"
	g.Expect(p.GetConfig().NodeConfig[0].NodeName).To(Equal("node"))
	g.Expect(p.NodeName()).To(Equal("node"))
}

func TestGettersBeforeInit(t *testing.T) {
	g := NewWithT(t)
	p := NewPlugin()
	g.Expect(p.GetIPAMConfig()).To(BeNil())
	g.Expect(p.GetIPAMConfigForJSON()).To(BeNil())
	g.Expect(p.GetSRv6Config()).To(BeNil())
	g.Expect(p.GetStaticDefaultGW().IsValid()).To(BeFalse())
	g.Expect(p.GetNodeConfig()).To(BeNil())
}

func TestInitErrors(t *testing.T) {
	g := NewWithT(t)
	p := NewPlugin(UseConf(DefaultConfig()))
	g.Expect(p.Init()).To(MatchError(ContainSubstring("ServiceLabel")))

	c := DefaultConfig()
	c.IPAMConfig.PodSubnetCIDR = "1.2.3./19"
	c.IPAMConfig.VxlanCIDR = "1.2.3./20"
	p = NewPlugin(UseConf(c), testDeps("node"))
	err := p.Init()
	g.Expect(err).To(MatchError(ContainSubstring(`config UseConf: ipamConfig.podSubnetCIDR "1.2.3./19": invalid CIDR`)))
	g.Expect(err).To(MatchError(ContainSubstring(`ipamConfig.vxlanCIDR "1.2.3./20": invalid CIDR`)))
}

func write(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	NewWithT(t).Expect(os.WriteFile(path, []byte(body), 0o600)).To(Succeed())
	return path
}

// fileResult builds a plugin with NewPlugin's own file lookup, registers
// its flags, parses args and runs Init.
func fileResult(t *testing.T, args ...string) (*Plugin, error) {
	t.Helper()
	p := NewPlugin(testDeps("node"))
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	p.RegisterFlags(fs)
	NewWithT(t).Expect(fs.Parse(args)).To(Succeed())
	return p, p.Init()
}

// The file is found via -contiv-config, else CONTIV_CONFIG, else
// contiv.conf in -config-dir / CONFIG_DIR, else in the working directory.
func TestConfigFileSelection(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	fromFlag := write(t, dir, "flag.conf", "ipamConfig: {podSubnetCIDR: 10.11.0.0/16}\n")
	fromEnv := write(t, dir, "env.conf", "ipamConfig: {podSubnetCIDR: 10.12.0.0/16}\n")
	sub := filepath.Join(dir, "etc")
	NewWithT(t).Expect(os.Mkdir(sub, 0o755)).To(Succeed())
	write(t, sub, "contiv.conf", "ipamConfig: {podSubnetCIDR: 10.13.0.0/16}\n")

	pod := func(t *testing.T, args ...string) string {
		t.Helper()
		p, err := fileResult(t, args...)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		return p.GetIPAMConfig().PodSubnetCIDR.String()
	}
	t.Run("no file: defaults", func(t *testing.T) {
		NewWithT(t).Expect(pod(t)).To(Equal("10.1.0.0/16"))
	})
	t.Run("-config-dir", func(t *testing.T) {
		NewWithT(t).Expect(pod(t, "-config-dir", sub)).To(Equal("10.13.0.0/16"))
	})
	t.Run("-contiv-config", func(t *testing.T) {
		NewWithT(t).Expect(pod(t, "-contiv-config", fromFlag)).To(Equal("10.11.0.0/16"))
	})
	t.Run("CONTIV_CONFIG", func(t *testing.T) {
		t.Setenv("CONTIV_CONFIG", fromEnv)
		NewWithT(t).Expect(pod(t)).To(Equal("10.12.0.0/16"))
	})
	t.Run("flag beats CONTIV_CONFIG", func(t *testing.T) {
		t.Setenv("CONTIV_CONFIG", fromEnv)
		NewWithT(t).Expect(pod(t, "-contiv-config", fromFlag)).To(Equal("10.11.0.0/16"))
	})
	t.Run("CONFIG_DIR", func(t *testing.T) {
		t.Setenv("CONFIG_DIR", sub)
		NewWithT(t).Expect(pod(t)).To(Equal("10.13.0.0/16"))
	})
	t.Run("missing named file", func(t *testing.T) {
		_, err := fileResult(t, "-contiv-config", filepath.Join(dir, "nope.conf"))
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring("not found")))
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring("flag -contiv-config")))
	})
}

// LoadConfig loads and validates before Init (and before any other
// plugin's Init); Init uses what it loaded.
func TestLoadConfigBeforeInit(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	path := write(t, dir, "contiv.conf", "ipamConfig: {podSubnetCIDR: 10.11.0.0/16}\n")
	p := NewPlugin(testDeps("node"))
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	p.RegisterFlags(fs)
	g.Expect(fs.Parse([]string{"-contiv-config", path})).To(Succeed())
	g.Expect(p.LoadConfig()).To(Succeed())
	write(t, dir, "contiv.conf", "ipamConfig: {podSubnetCIDR: 10.12.0.0/16}\n")
	g.Expect(p.Init()).To(Succeed())
	g.Expect(p.GetIPAMConfig().PodSubnetCIDR.String()).To(Equal("10.11.0.0/16"), "Init uses what LoadConfig loaded")

	bad := write(t, dir, "bad.conf", "ipamConfig: {podSubnetOneNodePrefixLen: 30}\n")
	p = NewPlugin(testDeps("node"))
	fs = flag.NewFlagSet("agent", flag.ContinueOnError)
	p.RegisterFlags(fs)
	g.Expect(fs.Parse([]string{"-contiv-config", bad})).To(Succeed())
	err := p.LoadConfig()
	g.Expect(err).To(MatchError(ContainSubstring("config " + bad + ": ipamConfig.podSubnetOneNodePrefixLen 30")))
}

func TestFileErrorsNameTheFile(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	unknown := write(t, dir, "unknown.conf", "ipamConfig: {podSubnetCIDR: 10.11.0.0/16, vxlanCidr2: 1.2.3.0/24}\n")
	invalid := write(t, dir, "invalid.conf", "ipamConfig: {podSubnetCIDR: 10.11.0.0/16, podSubnetOneNodePrefixLen: 8}\n")

	g := NewWithT(t)
	_, err := fileResult(t, "-contiv-config", unknown)
	g.Expect(err).To(MatchError(ContainSubstring(unknown)))
	g.Expect(err).To(MatchError(ContainSubstring(`unknown key "ipamConfig.vxlanCidr2"`)))
	_, err = fileResult(t, "-contiv-config", invalid)
	g.Expect(err).To(MatchError(ContainSubstring("config " + invalid + ": ipamConfig.podSubnetOneNodePrefixLen 8")))
}

func TestLoadsTheSampleFile(t *testing.T) {
	g := NewWithT(t)
	sample, err := filepath.Abs("contiv.conf")
	g.Expect(err).NotTo(HaveOccurred())
	p, err := fileResult(t, "-contiv-config", sample)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*p.GetIPAMConfigForJSON()).To(Equal(DefaultConfig().IPAMConfig))
	g.Expect(p.GetIPAMConfig().PodSubnetCIDR.String()).To(Equal(DefaultPodSubnetCIDR))
	g.Expect(p.GetNodeConfig()).To(BeNil())
}

// Getters run concurrently with the loop's Resync and Update (-race).
func TestConcurrentGetters(t *testing.T) {
	c := ipamFixture()
	c.CRDNodeConfigurationDisabled = false
	c.NodeConfig = []NodeConfig{{NodeName: "node", Gateway: "3.4.5.194"}}
	loop := &fakeLoop{}
	p := NewPlugin(UseConf(c), testDeps("node"))
	NewWithT(t).Expect(p.Init()).To(Succeed())
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				_ = p.GetStaticDefaultGW()
				_ = p.GetNodeConfig()
				_ = p.GetIPAMConfig()
				_ = p.GetIPAMConfigForJSON()
			}
		}()
	}
	key := NodeConfigKey("node")
	for i := range 200 {
		var ev *api.KubeStateChange
		if i%2 == 0 {
			ev = &api.KubeStateChange{Resource: NodeConfigResource, Key: key, NewValue: crdValue(t, map[string]any{"gateway": "3.4.5.195"})}
		} else {
			ev = &api.KubeStateChange{Resource: NodeConfigResource, Key: key}
		}
		_, err := p.Update(ev, followUpsTo(loop))
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
	}
	close(stop)
	wg.Wait()
	NewWithT(t).Expect(loop.pushed()).To(HaveLen(200))
}
