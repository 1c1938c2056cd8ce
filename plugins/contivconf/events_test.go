package contivconf

import (
	"errors"
	"net/netip"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/contiv-ipam/agent/infra/health"
	"github.com/contiv-ipam/agent/infra/health/healthtest"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/controller/controllertest"
)

// fakeLoop records pushed events; err, when set, is returned by PushEvent.
type fakeLoop struct {
	mu     sync.Mutex
	events []api.Event
	err    error
}

func (l *fakeLoop) PushEvent(ev api.Event) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	l.events = append(l.events, ev)
	return nil
}

func (l *fakeLoop) pushed() []api.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]api.Event(nil), l.events...)
}

// followUpsTo is a transaction whose follow-ups go to l.
func followUpsTo(l *fakeLoop) *controllertest.Txn {
	return &controllertest.Txn{OnFollowUp: l.PushEvent}
}

func crdValue(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// crdPlugin has CRD node configuration enabled and a file entry for "node"
// with gateway .194.
func crdPlugin(t *testing.T, mod ...func(*Config)) *Plugin {
	return crdPluginWith(t, mod, nil)
}

// withReporting wires a fake health reporter and a metrics registry.
func withReporting(h *healthtest.Recorder, reg *prometheus.Registry) Option {
	return UseDeps(func(d *Deps) { d.StatusCheck, d.Metrics = h, fakeMetrics{reg} })
}

func crdPluginWith(t *testing.T, mod []func(*Config), extra Option) *Plugin {
	t.Helper()
	c := ipamFixture()
	c.CRDNodeConfigurationDisabled = false
	c.NodeConfig = []NodeConfig{{NodeName: "node", Gateway: "3.4.5.194"}}
	for _, m := range mod {
		m(&c)
	}
	opts := []Option{UseConf(c), testDeps("node")}
	if extra != nil {
		opts = append(opts, extra)
	}
	p := NewPlugin(opts...)
	NewWithT(t).Expect(p.Init()).To(Succeed())
	return p
}

func TestHandlesEvent(t *testing.T) {
	enabled := crdPlugin(t)
	disabled := crdPlugin(t, func(c *Config) { c.CRDNodeConfigurationDisabled = true })
	own := &api.KubeStateChange{Resource: "nodeconfig", Key: "k8s/nodeconfig/node", NewValue: &structpb.Struct{}}
	cases := []struct {
		name              string
		ev                api.Event
		enabled, disabled bool
	}{
		{"DB resync", &api.DBResync{}, true, true},
		{"healing resync", &api.HealingResync{Type: api.AfterError}, true, true},
		{"periodic healing", &api.HealingResync{Type: api.Periodic}, true, true},
		{"node config change", &NodeConfigChange{NodeName: "node"}, true, true},
		{"own nodeconfig", own, true, false},
		{"own nodeconfig deleted", &api.KubeStateChange{Resource: "nodeconfig", Key: "k8s/nodeconfig/node"}, true, false},
		{"other node's nodeconfig", &api.KubeStateChange{Resource: "nodeconfig", Key: "k8s/nodeconfig/other"}, false, false},
		{"prefix of the name", &api.KubeStateChange{Resource: "nodeconfig", Key: "k8s/nodeconfig/node2"}, false, false},
		{"node resource", &api.KubeStateChange{Resource: "node", Key: "k8s/node/node"}, false, false},
		{"shutdown", &api.Shutdown{}, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(enabled.HandlesEvent(tc.ev)).To(Equal(tc.enabled))
			g.Expect(disabled.HandlesEvent(tc.ev)).To(Equal(tc.disabled))
		})
	}
}

func TestResyncReadsTheCRD(t *testing.T) {
	g := NewWithT(t)
	p := crdPlugin(t)
	ks := api.KubeStateData{"nodeconfig": {
		"k8s/nodeconfig/node": crdValue(t, map[string]any{
			"mainVPPInterface":   map[string]any{"interfaceName": "eth1", "ip": "3.4.5.200/26"},
			"otherVPPInterfaces": []any{map[string]any{"interfaceName": "eth2", "useDHCP": true}},
			"gateway":            "3.4.5.195",
			"natExternalTraffic": true,
		}),
		"k8s/nodeconfig/other": crdValue(t, map[string]any{"gateway": "9.9.9.9"}),
	}}
	g.Expect(p.Resync(&api.DBResync{KubeState: ks}, ks, 1, nil)).To(Succeed())
	g.Expect(p.GetNodeConfig()).To(Equal(&NodeConfig{
		NodeName:           "node",
		MainVPPInterface:   InterfaceConfig{InterfaceName: "eth1", IP: "3.4.5.200/26"},
		OtherVPPInterfaces: []InterfaceConfig{{InterfaceName: "eth2", UseDHCP: true}},
		Gateway:            "3.4.5.195",
		NatExternalTraffic: true,
	}), "the CRD beats the file entry")
	g.Expect(p.GetStaticDefaultGW()).To(Equal(netip.MustParseAddr("3.4.5.195")))

	// The CRD disappears: back to the file's entry.
	g.Expect(p.Resync(&api.DBResync{}, api.KubeStateData{}, 2, nil)).To(Succeed())
	g.Expect(p.GetNodeConfig().Gateway).To(Equal("3.4.5.194"))
	g.Expect(p.GetStaticDefaultGW()).To(Equal(netip.MustParseAddr("3.4.5.194")))
}

func TestResyncIgnoresTheCRDWhenDisabled(t *testing.T) {
	g := NewWithT(t)
	p := crdPlugin(t, func(c *Config) { c.CRDNodeConfigurationDisabled = true })
	ks := api.KubeStateData{"nodeconfig": {"k8s/nodeconfig/node": crdValue(t, map[string]any{"gateway": "3.4.5.195"})}}
	g.Expect(p.Resync(&api.DBResync{}, ks, 1, nil)).To(Succeed())
	g.Expect(p.GetStaticDefaultGW()).To(Equal(netip.MustParseAddr("3.4.5.194")))
}

// v4Subnets is the family reference of an IPv4 configuration.
var v4Subnets = subnet{key: "ipamConfig.podSubnetCIDR", text: "10.1.0.0/16", prefix: netip.MustParsePrefix("10.1.0.0/16")}

func TestCRDShapes(t *testing.T) {
	cases := []struct {
		name    string
		value   map[string]any
		want    NodeConfig
		wantErr string
	}{
		{name: "camelCase spec", value: map[string]any{"gateway": "1.1.1.1", "stealInterface": "eth0"},
			want: NodeConfig{NodeName: "node", Gateway: "1.1.1.1", StealInterface: "eth0"}},
		{name: "proto names", value: map[string]any{"main_vpp_interface": map[string]any{"interface_name": "e", "use_dhcp": true},
			"nat_external_traffic": true, "name": "node"},
			want: NodeConfig{NodeName: "node", MainVPPInterface: InterfaceConfig{InterfaceName: "e", UseDHCP: true}, NatExternalTraffic: true}},
		{name: "CRD object", value: map[string]any{"apiVersion": "nodeconfig.contiv.vpp/v1", "kind": "NodeConfig",
			"metadata": map[string]any{"name": "node"}, "spec": map[string]any{"gateway": "1.1.1.2"}},
			want: NodeConfig{NodeName: "node", Gateway: "1.1.1.2"}},
		{name: "nodeName is the key's", value: map[string]any{"nodeName": "else", "gateway": "1.1.1.3"},
			want: NodeConfig{NodeName: "node", Gateway: "1.1.1.3"}},
		{name: "empty", value: map[string]any{}, want: NodeConfig{NodeName: "node"}},
		{name: "bad gateway", value: map[string]any{"gateway": "1.1.1"},
			wantErr: `nodeconfig key "k8s/nodeconfig/node": gateway "1.1.1": invalid IP address`},
		{name: "IPv6 gateway, IPv4 subnets", value: map[string]any{"gateway": "fe80::1"},
			wantErr: `nodeconfig key "k8s/nodeconfig/node": gateway "fe80::1": is IPv6 but ipamConfig.podSubnetCIDR "10.1.0.0/16" is IPv4`},
		{name: "multicast gateway", value: map[string]any{"gateway": "224.0.0.1"},
			wantErr: `nodeconfig key "k8s/nodeconfig/node": gateway "224.0.0.1": not a unicast host address`},
		{name: "bad ip", value: map[string]any{"mainVPPInterface": map[string]any{"ip": "1.1.1.1"}},
			wantErr: `nodeconfig key "k8s/nodeconfig/node": mainVPPInterface.ip "1.1.1.1": invalid CIDR`},
		{name: "wrong type", value: map[string]any{"gateway": 5},
			wantErr: `nodeconfig key "k8s/nodeconfig/node"`},
		{name: "unknown key", value: map[string]any{"gatway": "1.1.1.1"},
			wantErr: `unknown key "gatway"`},
		{name: "same field twice", value: map[string]any{"gateway": "1.1.1.1", "Gateway": "1.1.1.2"},
			wantErr: `mean the same field`},
		{name: "same field twice, nested", value: map[string]any{"otherVPPInterfaces": []any{map[string]any{"use_dhcp": true, "useDHCP": false}}},
			wantErr: `mean the same field`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			n, err := nodeConfigFromKube("k8s/nodeconfig/node", "node", crdValue(t, tc.value), v4Subnets)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				g.Expect(err).To(MatchError(ContainSubstring("k8s/nodeconfig/node")))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(*n).To(Equal(tc.want))
		})
	}
}

func TestCRDOfOtherMessageTypes(t *testing.T) {
	g := NewWithT(t)
	v, err := structpb.NewValue(map[string]any{"gateway": "1.1.1.4"})
	g.Expect(err).NotTo(HaveOccurred())
	n, err := nodeConfigFromKube("k8s/nodeconfig/node", "node", v, v4Subnets)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n.Gateway).To(Equal("1.1.1.4"), "any message protojson renders as an object")
	_, err = nodeConfigFromKube("k8s/nodeconfig/node", "node", wrapperspb.String("x"), v4Subnets)
	g.Expect(err).To(MatchError(ContainSubstring(`nodeconfig key "k8s/nodeconfig/node"`)))
}

// A malformed CRD never fails a resync (the agent would crash-loop): it is
// ignored and counted; without a good CRD value the plugin is unready with
// the reason and the file's entry applies; a valid value makes it ready.
func TestResyncWithABadCRDKeepsTheConfigAndWaits(t *testing.T) {
	g := NewWithT(t)
	h, reg := &healthtest.Recorder{}, prometheus.NewRegistry()
	p := crdPluginWith(t, nil, withReporting(h, reg))
	ks := api.KubeStateData{"nodeconfig": {"k8s/nodeconfig/node": crdValue(t, map[string]any{"gateway": "bad"})}}
	g.Expect(p.Resync(&api.DBResync{}, ks, 1, nil)).To(Succeed(), "never fatal")
	g.Expect(p.GetStaticDefaultGW()).To(Equal(netip.MustParseAddr("3.4.5.194")), "contiv.conf's entry applies")
	state, reason := h.Last()
	g.Expect(state).To(Equal(health.Init))
	g.Expect(reason).To(ContainSubstring(`nodeconfig key "k8s/nodeconfig/node": gateway "bad"`))
	g.Expect(testutil.ToFloat64(p.report.invalid)).To(Equal(1.0))

	ks = api.KubeStateData{"nodeconfig": {"k8s/nodeconfig/node": crdValue(t, map[string]any{"gateway": "3.4.5.197"})}}
	g.Expect(p.Resync(&api.HealingResync{}, ks, 2, nil)).To(Succeed())
	g.Expect(p.GetStaticDefaultGW()).To(Equal(netip.MustParseAddr("3.4.5.197")))
	state, _ = h.Last()
	g.Expect(state).To(Equal(health.OK))

	ks = api.KubeStateData{"nodeconfig": {"k8s/nodeconfig/node": crdValue(t, map[string]any{"gateway": "x"})}}
	g.Expect(p.Resync(&api.HealingResync{}, ks, 3, nil)).To(Succeed())
	g.Expect(p.GetStaticDefaultGW()).To(Equal(netip.MustParseAddr("3.4.5.197")), "the last good CRD stays")
	state, _ = h.Last()
	g.Expect(state).To(Equal(health.OK), "a good value is in use: still ready")
}

func TestUpdatePushesNodeConfigChange(t *testing.T) {
	g := NewWithT(t)
	loop := &fakeLoop{}
	p := crdPlugin(t)
	key := NodeConfigKey("node")

	// Created.
	ev := &api.KubeStateChange{Resource: NodeConfigResource, Key: key, NewValue: crdValue(t, map[string]any{"gateway": "3.4.5.195"})}
	desc, err := p.Update(ev, followUpsTo(loop))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(desc).NotTo(BeEmpty())
	g.Expect(p.GetStaticDefaultGW()).To(Equal(netip.MustParseAddr("3.4.5.195")))
	events := loop.pushed()
	g.Expect(events).To(HaveLen(1))
	change, ok := events[0].(*NodeConfigChange)
	g.Expect(ok).To(BeTrue())
	g.Expect(change.NodeName).To(Equal("node"))
	g.Expect(change.NodeConfig.Gateway).To(Equal("3.4.5.195"))
	g.Expect(change.GetName()).To(Equal("Node Configuration Change"))
	g.Expect(change.Method()).To(Equal(api.UpstreamResync))
	g.Expect(change.IsBlocking()).To(BeFalse())
	g.Expect(change.String()).To(ContainSubstring(`node "node"`))
	g.Expect(change.String()).To(ContainSubstring(`"gateway":"3.4.5.195"`))
	change.Done(nil)

	// The same value again: nothing changes, nothing is pushed.
	ev2 := &api.KubeStateChange{Resource: NodeConfigResource, Key: key, PrevValue: ev.NewValue, NewValue: crdValue(t, map[string]any{"gateway": "3.4.5.195"})}
	desc, err = p.Update(ev2, followUpsTo(loop))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(desc).To(BeEmpty())
	g.Expect(loop.pushed()).To(HaveLen(1))

	// Deleted: back to the file's entry.
	desc, err = p.Update(&api.KubeStateChange{Resource: NodeConfigResource, Key: key, PrevValue: ev.NewValue}, followUpsTo(loop))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(desc).To(ContainSubstring("removed"))
	g.Expect(p.GetStaticDefaultGW()).To(Equal(netip.MustParseAddr("3.4.5.194")))
	g.Expect(loop.pushed()).To(HaveLen(2))
	g.Expect(loop.pushed()[1].String()).To(ContainSubstring(`"gateway":"3.4.5.194"`))

	// A bad value is ignored and recorded (the description); no error, so
	// no healing resync; nothing changes.
	desc, err = p.Update(&api.KubeStateChange{Resource: NodeConfigResource, Key: key, NewValue: crdValue(t, map[string]any{"gateway": "x"})}, followUpsTo(loop))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(desc).To(ContainSubstring(`ignored: nodeconfig key "k8s/nodeconfig/node": gateway "x"`))
	g.Expect(loop.pushed()).To(HaveLen(2))

	// Events not ours are ignored.
	desc, err = p.Update(&api.KubeStateChange{Resource: NodeConfigResource, Key: NodeConfigKey("other"), NewValue: &structpb.Struct{}}, followUpsTo(loop))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(desc).To(BeEmpty())
	desc, err = p.Update(&api.Shutdown{}, followUpsTo(loop))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(desc).To(BeEmpty())
	g.Expect(p.Revert(ev)).To(Succeed())
}

func TestUpdateWithoutNodeFileEntry(t *testing.T) {
	g := NewWithT(t)
	loop := &fakeLoop{}
	p := crdPlugin(t, func(c *Config) { c.NodeConfig = nil })
	g.Expect(p.GetNodeConfig()).To(BeNil())
	key := NodeConfigKey("node")
	_, err := p.Update(&api.KubeStateChange{Resource: NodeConfigResource, Key: key, NewValue: crdValue(t, map[string]any{})}, followUpsTo(loop))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.GetNodeConfig()).To(Equal(&NodeConfig{NodeName: "node"}))
	_, err = p.Update(&api.KubeStateChange{Resource: NodeConfigResource, Key: key}, followUpsTo(loop))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.GetNodeConfig()).To(BeNil())
	g.Expect(loop.pushed()).To(HaveLen(2))
	g.Expect(loop.pushed()[1].String()).To(Equal(`Node Configuration Change (node "node": none)`))
}

func TestUpdatePushErrorsAndNoLoop(t *testing.T) {
	g := NewWithT(t)
	loop := &fakeLoop{err: api.ErrEventQueueFull}
	p := crdPlugin(t)
	ev := &api.KubeStateChange{Resource: NodeConfigResource, Key: NodeConfigKey("node"), NewValue: crdValue(t, map[string]any{"gateway": "3.4.5.196"})}
	_, err := p.Update(ev, followUpsTo(loop))
	g.Expect(errors.Is(err, api.ErrEventQueueFull)).To(BeTrue())
	g.Expect(p.GetStaticDefaultGW()).To(Equal(netip.MustParseAddr("3.4.5.196")), "applied; the healing resync will resync everyone")

	p = crdPlugin(t)
	txn := controllertest.NewTxn()
	desc, err := p.Update(ev, txn)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(desc).NotTo(BeEmpty())
	g.Expect(txn.FollowUps()).To(HaveLen(1), "a follow-up needs no EventLoop")
	g.Expect(p.GetStaticDefaultGW()).To(Equal(netip.MustParseAddr("3.4.5.196")))
}

func TestResyncBeforeInit(t *testing.T) {
	g := NewWithT(t)
	p := NewPlugin()
	g.Expect(p.Resync(&api.DBResync{}, nil, 1, nil)).To(MatchError(ContainSubstring("before Init")))
	g.Expect(p.HandlesEvent(&api.KubeStateChange{Resource: NodeConfigResource, Key: NodeConfigKeyPrefix})).To(BeFalse())
}

// fakeMetrics registers on a test registry.
type fakeMetrics struct{ reg *prometheus.Registry }

func (m fakeMetrics) Registerer() prometheus.Registerer     { return m.reg }
func (m fakeMetrics) Register(c prometheus.Collector) error { return m.reg.Register(c) }
