package nodesync_test

import (
	"context"
	"errors"
	"flag"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
	"github.com/contiv-ipam/agent/plugins/nodesync"
)

// registry is a metrics.API on a registry of its own.
type registry struct{ *prometheus.Registry }

func (r registry) Registerer() prometheus.Registerer { return r.Registry }

func withMetrics(r registry) nodesync.Option {
	return nodesync.UseDeps(func(d *nodesync.Deps) { d.Metrics = r })
}

// counter returns the value of a counter with one label, 0 when absent.
func (r registry) counter(t *testing.T, name, label, value string) float64 {
	t.Helper()
	mfs, err := r.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// putStored writes a last node ID into the local DB.
func putStored(t *testing.T, b kvdb.Broker, value string) {
	t.Helper()
	if err := b.Put(context.Background(), nodesync.NodeIDKey, []byte(value)); err != nil {
		t.Fatal(err)
	}
}

// withArgs parses a command line into the plugin's flags.
func withArgs(args ...string) nodesync.Option {
	return func(p *nodesync.Plugin) {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		p.RegisterFlags(fs)
		if err := fs.Parse(args); err != nil {
			panic(err)
		}
	}
}

func TestFirstClaimStoresTheNodeID(t *testing.T) {
	g := NewWithT(t)
	db, local := newDB(t, etcdtest.Start(t)), newBolt(t)
	putRecord(t, db, &vppnode.VppNode{Id: 1, Name: "node-a"})
	p := newPlugin(t, "node-x", db, &loop{}, withLocalDB(local))
	g.Expect(resync(p, nil)).To(Succeed())
	g.Expect(p.GetNodeID()).To(Equal(uint32(2)))
	g.Expect(storedID(t, local)).To(Equal("2"))

	// A restart finds the same ID: nothing changes.
	g.Expect(p.Close()).To(Succeed())
	again := newPlugin(t, "node-x", db, &loop{}, withLocalDB(local))
	g.Expect(resync(again, nil)).To(Succeed())
	g.Expect(again.GetNodeID()).To(Equal(uint32(2)))
	g.Expect(storedID(t, local)).To(Equal("2"))
}

// changedIDSetup is a node that last ran with ID 3, now held by node-b:
// the claim gives it ID 1.
func changedIDSetup(t *testing.T) (kvdb.Store, kvdb.Broker) {
	db, local := newDB(t, etcdtest.Start(t)), newBolt(t)
	putRecord(t, db, &vppnode.VppNode{Id: 3, Name: "node-b"})
	putStored(t, local, "3")
	return db, local
}

func TestChangedNodeIDIsRefused(t *testing.T) {
	g := NewWithT(t)
	db, local := changedIDSetup(t)
	reg := registry{prometheus.NewRegistry()}
	p := newPlugin(t, "node-x", db, &loop{}, withLocalDB(local), withMetrics(reg))
	err := resync(p, nil)
	g.Expect(api.IsFatal(err)).To(BeTrue())
	g.Expect(errors.Is(err, nodesync.ErrNodeIDChanged)).To(BeTrue())
	g.Expect(err.Error()).To(And(
		ContainSubstring(`node "node-x" last ran with node ID 3 (local DB key "/contiv-agent/nodesync/node-id") but the claim in etcd gives it ID 1`),
		ContainSubstring("restart once with -accept-node-id-change (env ACCEPT_NODE_ID_CHANGE=true)"),
		ContainSubstring("to keep ID 3, make etcd key /vnf-agent/contiv-ksr/allocatedIDs/3 free")))
	expectLost(g, p, "node-x")
	g.Expect(storedID(t, local)).To(Equal("3"), "the stored ID is kept")
	g.Expect(reg.counter(t, "contiv_nodesync_node_id_changes_total", "action", "refused")).To(Equal(1.0))
	g.Expect(reg.counter(t, "contiv_nodesync_node_id_changes_total", "action", "accepted")).To(BeZero())
}

func TestChangedNodeIDIsAccepted(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  nodesync.Option
	}{
		{"flag", withArgs("-accept-node-id-change")},
		{"env", nodesync.UseEnv(func(k string) (string, bool) { return "true", k == "ACCEPT_NODE_ID_CHANGE" })},
		{"option", nodesync.UseConf(nodesync.Config{PresenceTTL: nodesync.DefaultPresenceTTL, AcceptNodeIDChange: true})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			db, local := changedIDSetup(t)
			reg := registry{prometheus.NewRegistry()}
			p := newPlugin(t, "node-x", db, &loop{}, withLocalDB(local), withMetrics(reg), tc.opt)
			g.Expect(resync(p, nil)).To(Succeed())
			g.Expect(p.GetNodeID()).To(Equal(uint32(1)))
			g.Expect(storedID(t, local)).To(Equal("1"), "the new ID is stored")
			g.Expect(reg.counter(t, "contiv_nodesync_node_id_changes_total", "action", "accepted")).To(Equal(1.0))
		})
	}
}

// The stored ID is claimed again when it is free, rather than the smallest
// free ID: a node whose record was deleted while it was down keeps its ID.
func TestStoredIDIsTakenBackWhenFree(t *testing.T) {
	g := NewWithT(t)
	db, local := newDB(t, etcdtest.Start(t)), newBolt(t)
	putStored(t, local, "5")
	p := newPlugin(t, "node-x", db, &loop{}, withLocalDB(local))
	g.Expect(resync(p, nil)).To(Succeed())
	g.Expect(p.GetNodeID()).To(Equal(uint32(5)))
	g.Expect(records(t, db)).To(HaveKeyWithValue(uint32(5), HaveField("Name", "node-x")))
}

func TestMirrorIDIsCheckedAgainstTheStoredID(t *testing.T) {
	g := NewWithT(t)
	bolt := newBolt(t)
	putStored(t, bolt, "2")
	down := &fakeStore{listErr: errBoom, txnErr: errBoom}
	mirror := api.KubeStateData{"vppnode": vppState(&vppnode.VppNode{Id: 7, Name: "node-x"})}
	p := newPlugin(t, "node-x", down, &loop{}, withLocalDB(bolt))
	err := p.Resync(local(mirror), mirror, 1, nil)
	g.Expect(errors.Is(err, nodesync.ErrNodeIDChanged)).To(BeTrue(), "error %v", err)
	g.Expect(err.Error()).To(ContainSubstring("last ran with node ID 2 (local DB key \"/contiv-agent/nodesync/node-id\") but the local mirror of the kube state gives it ID 7"))
	expectLost(g, p, "node-x")
}

func TestUnreadableStoredID(t *testing.T) {
	g := NewWithT(t)
	db, local := newDB(t, etcdtest.Start(t)), newBolt(t)
	putStored(t, local, "abc")
	p := newPlugin(t, "node-x", db, &loop{}, withLocalDB(local))
	err := resync(p, nil)
	g.Expect(errors.Is(err, nodesync.ErrNodeIDChanged)).To(BeTrue(), "error %v", err)
	g.Expect(err.Error()).To(ContainSubstring(`last ran with node ID "abc"`))
	g.Expect(err.Error()).NotTo(ContainSubstring("to keep ID"))

	g.Expect(p.Close()).To(Succeed())
	accepted := newPlugin(t, "node-x", db, &loop{}, withLocalDB(local), withArgs("-accept-node-id-change=true"))
	g.Expect(resync(accepted, nil)).To(Succeed())
	g.Expect(storedID(t, local)).To(Equal("1"))
}

func TestFlagsAreValidated(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  nodesync.Option
		want string
	}{
		{"short ttl", withArgs("-nodesync-presence-ttl", "500ms"), "-nodesync-presence-ttl: 500ms, want at least 1s"},
		{"env ttl", nodesync.UseEnv(func(k string) (string, bool) { return "soon", k == "NODESYNC_PRESENCE_TTL" }),
			`flag -nodesync-presence-ttl / env NODESYNC_PRESENCE_TTL: "soon" is not a duration such as "15s"`},
		{"env bool", nodesync.UseEnv(func(k string) (string, bool) { return "maybe", k == "ACCEPT_NODE_ID_CHANGE" }),
			`flag -accept-node-id-change / env ACCEPT_NODE_ID_CHANGE: "maybe" is not a boolean (true or false)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := nodesync.NewPlugin(nodesync.UseDeps(func(d *nodesync.Deps) { d.ServiceLabel, d.Log = label("node-x"), testLog(t) }), tc.opt)
			NewWithT(t).Expect(p.Init()).To(MatchError(ContainSubstring(tc.want)))
		})
	}
}

func TestPresenceTTLFlag(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	p := newPlugin(t, "node-x", newDB(t, srv), &loop{}, withArgs("-nodesync-presence-ttl=4s"))
	g.Expect(resync(p, nil)).To(Succeed())
	_, lease, _ := presenceOf(t, srv.Client(t), "node-x")
	ttl, err := srv.Client(t).TimeToLive(t.Context(), lease)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ttl.GrantedTTL).To(BeEquivalentTo(4))
}
