package nodesync_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/agent"
	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/health"
	"github.com/contiv-ipam/agent/infra/kvdb/bolt"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/infra/rest/resttest"
	"github.com/contiv-ipam/agent/infra/servicelabel"
	"github.com/contiv-ipam/agent/plugins/controller"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	"github.com/contiv-ipam/agent/plugins/ksr/model/node"
	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
	"github.com/contiv-ipam/agent/plugins/nodesync"
)

// stack is etcd + bolt + servicelabel + controller + nodesync under one
// agent, wired as cmd/contiv-agent wires them.
type stack struct {
	ctrl   *controller.Plugin
	ns     *nodesync.Plugin
	http   *resttest.Server
	health *reporter
	stop   func() error
}

// reporter is a health.Reporter that keeps the last error reported.
type reporter struct {
	mu    sync.Mutex
	fatal error
}

func (r *reporter) Register(string, health.Probe) {}

func (r *reporter) ReportStateChange(_ string, state health.State, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if state == health.Error {
		r.fatal = err
	}
}

// err returns the last error reported, nil if none.
func (r *reporter) err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fatal
}

func startStack(t *testing.T, endpoint, name string, opts ...nodesync.Option) *stack {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	s := &stack{http: resttest.New(t), health: &reporter{}}
	etcdP := etcd.NewPlugin(etcd.UseConf(etcdConfig(endpoint)), etcd.UseEnv(noEnv),
		etcd.UseDeps(func(d *etcd.Deps) { d.Cfg, d.Log = config.NoFile, quiet }))
	bc := bolt.DefaultConfig()
	bc.DBPath = filepath.Join(t.TempDir(), "bolt.db")
	boltP := bolt.NewPlugin(bolt.UseConf(bc), bolt.UseDeps(func(d *bolt.Deps) { d.Cfg, d.Log = config.NoFile, quiet }))
	labelP := servicelabel.NewPlugin(servicelabel.UseLabel(name), servicelabel.UseDeps(func(d *servicelabel.Deps) {
		d.Cfg, d.Log = config.NoFile, quiet
	}))
	cc := controller.DefaultConfig()
	cc.StartupResyncDeadline = 20 * time.Second
	loop := &controller.LoopRef{} // the cycle, broken as cmd/contiv-agent breaks it
	s.ns = nodesync.NewPlugin(append([]nodesync.Option{nodesync.UseEnv(noEnv), nodesync.UseDeps(func(d *nodesync.Deps) {
		d.Cfg, d.Log = config.NoFile, testLog(t)
		d.ServiceLabel, d.DB, d.Presence, d.LocalDB, d.EventLoop = labelP, etcdP, etcdP, boltP, loop
	})}, opts...)...)
	s.ctrl = controller.NewPlugin(controller.UseConf(cc), controller.UseLoopRef(loop), controller.UseHandlers(s.ns),
		controller.UseDeps(func(d *controller.Deps) {
			d.Cfg, d.Log = config.NoFile, testLog(t)
			d.RemoteDB, d.LocalDB, d.HTTP, d.StatusCheck = etcdP, boltP, s.http.Plugin, s.health
		}))
	a, err := agent.NewAgent(agent.Plugins(etcdP, boltP, labelP, s.ns, s.ctrl), agent.Args(nil), agent.Logger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	s.stop = a.Stop
	t.Cleanup(func() { _ = a.Stop() })
	return s
}

// putKSR writes a model value to etcd under the KSR prefix with a raw client.
func putKSR(t *testing.T, srv *etcdtest.Server, key string, value []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := srv.Client(t).Put(ctx, codec.KSRPrefix+key, string(value)); err != nil {
		t.Fatal(err)
	}
}

// nodeUpdates returns the descriptions of the NodeUpdate records in the
// controller's event history, read over REST.
func (s *stack) nodeUpdates(t *testing.T) []string {
	_, body := s.http.Get(controller.EventHistoryPath)
	var recs []controller.EventRecord
	if err := json.Unmarshal([]byte(body), &recs); err != nil {
		t.Fatalf("event history %q: %v", body, err)
	}
	var out []string
	for _, r := range recs {
		if r.Name == nodesync.NodeUpdateName {
			if !r.IsFollowUp {
				t.Errorf("NodeUpdate %d is not a follow-up", r.SeqNum)
			}
			out = append(out, r.Description)
		}
	}
	return out
}

func TestNodeChangesInEtcdReachNodesyncThroughTheController(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	putKSR(t, srv, vppnode.Key(1), marshal(t, &vppnode.VppNode{Id: 1, Name: "node-b"}))
	s := startStack(t, srv.Endpoint(), "node-a")

	// The first DB resync claims ID 2 (1 is node-b's).
	g.Eventually(s.ns.GetNodeID, 10*time.Second).Should(Equal(uint32(2)))
	g.Expect(s.ns.GetAllNodes()).To(HaveKey("node-b"))

	// A Kubernetes node record of node-b written to etcd yields a NodeUpdate.
	putKSR(t, srv, node.Key("node-b"), marshal(t, &node.Node{Name: "node-b", Pod_CIDR: "10.1.1.0/24",
		Addresses: []*node.NodeAddress{addr(node.NodeAddress_NodeInternalIP, "10.0.0.2")}}))
	g.Eventually(func() []string { return s.nodeUpdates(t) }, 10*time.Second).Should(ContainElement(
		And(ContainSubstring("Node Update node-b"), ContainSubstring("PodCIDR: 10.1.1.0/24"), ContainSubstring("MgmtIPs: [10.0.0.2]"))))

	// A new node joins.
	putKSR(t, srv, vppnode.Key(5), marshal(t, &vppnode.VppNode{Id: 5, Name: "node-c"}))
	g.Eventually(func() []string { return s.nodeUpdates(t) }, 10*time.Second).Should(ContainElement(
		And(ContainSubstring("Node Update node-c"), ContainSubstring("* prev: <nil>"))))
	g.Eventually(s.ns.GetAllNodes, 10*time.Second).Should(HaveKey("node-c"))

	// This node's pod CIDR changes.
	putKSR(t, srv, node.Key("node-a"), marshal(t, &node.Node{Name: "node-a", Pod_CIDR: "10.1.2.0/24"}))
	g.Eventually(func() []string { return s.nodeUpdates(t) }, 10*time.Second).Should(ContainElement(
		ContainSubstring("Node Update node-a")))

	// Publishing this node's addresses writes its record; its own change is
	// not handled and yields no NodeUpdate.
	g.Expect(s.ns.PublishNodeIPs([]*nodesync.IPWithNetwork{ipn(t, "192.168.16.2/24")}, nodesync.IPv4)).To(Succeed())
	g.Eventually(func() bool {
		for _, r := range s.ctrl.EventHistory() {
			if strings.Contains(r.Description, vppnode.Key(2)) {
				return slices.IndexFunc(r.Handlers, func(h controller.HandlerRecord) bool { return h.Handler == "nodesync" }) < 0
			}
		}
		return false
	}, 10*time.Second).Should(BeTrue(), "the change of allocatedIDs/2 reached the controller but not nodesync")
	g.Expect(s.nodeUpdates(t)).To(HaveLen(3))

	// The handler's change descriptions are in the history.
	var changes []string
	for _, r := range s.ctrl.EventHistory() {
		for _, h := range r.Handlers {
			if h.Handler == "nodesync" && h.Change != "" {
				changes = append(changes, h.Change)
			}
		}
	}
	g.Expect(changes).To(ContainElement("node node-c joined (ID 5, VPP IPs [])"))
}
