package nodecidr

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/nodeipam/ipam"

	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd"
	"github.com/contiv-ipam/agent/plugins/nodeipam"
)

// The implementations, ours first.
var impls = []impl{
	{name: "contiv", prepare: prepareContiv},
	{name: "k8s-range-allocator", prepare: prepareK8s},
}

// contiv-ksr's defaults for the election (plugins/ksr/config.go).
const (
	electionPrefix = "/contiv-ksr/election"
	electionTTL    = 10 * time.Second
)

// prepareContiv starts an embedded etcd (the etcd plugin's embedded mode,
// as contiv-ksr runs it without endpoints) and wins the election; the
// allocator it starts writes its claims there, fenced by the leadership.
func prepareContiv(tb testing.TB) (start, func() int64) {
	c := etcd.DefaultConfig()
	c.Embedded = true
	c.EmbeddedDataDir = tb.TempDir()
	c.EmbeddedClientURL, c.EmbeddedPeerURL = "http://127.0.0.1:0", "http://127.0.0.1:0"
	db := etcd.NewPlugin(etcd.UseConf(c), etcd.UseEnv(func(string) (string, bool) { return "", false }),
		etcd.UseDeps(func(d *etcd.Deps) { d.Cfg, d.Log = config.NoFile, slog.New(slog.DiscardHandler) }))
	if err := db.Init(); err != nil {
		tb.Fatalf("embedded etcd: %v", err)
	}
	tb.Cleanup(func() {
		if err := db.Close(); err != nil {
			tb.Logf("embedded etcd: close: %v", err)
		}
	})
	lead, err := db.Campaign(tb.Context(), electionPrefix, []byte("bench"), electionTTL)
	if err != nil {
		tb.Fatalf("campaign: %v", err)
	}
	ledger := &countingLedger{Ledger: &nodeipam.EtcdLedger{DB: db, Prefix: nodeipam.DefaultClaimPrefix,
		Fence: func() []kvdb.Cmp { return []kvdb.Cmp{lead.Fence()} }}}
	run := func(ctx context.Context, client kubernetes.Interface) (func(), error) {
		ctx, cancel := context.WithCancel(ctx)
		factory := informers.NewSharedInformerFactory(client, 0)
		nodes := factory.Core().V1().Nodes()
		nodes.Informer()
		// contiv-ksr starts its informers before it campaigns.
		factory.Start(ctx.Done())
		cfg := nodeipam.DefaultConfig()
		cfg.Enabled = true
		cfg.ClusterCIDRs = []string{clusterCIDR}
		cfg.NodeCIDRMaskSizeIPv4 = nodeMask
		cfg.Workers = workers
		a, err := nodeipam.New(ctx, nodeipam.Params{Client: client, Nodes: nodes, Config: cfg, Ledger: ledger,
			Log: slog.New(slog.DiscardHandler)})
		if err != nil {
			cancel()
			factory.Shutdown()
			return nil, err
		}
		var wg sync.WaitGroup
		wg.Go(func() { a.Run(ctx.Done()) })
		return func() { cancel(); wg.Wait(); factory.Shutdown() }, nil
	}
	return run, ledger.n.Load
}

// countingLedger counts the writes (puts and deletes) to a Ledger.
type countingLedger struct {
	nodeipam.Ledger
	n atomic.Int64
}

var _ nodeipam.Ledger = (*countingLedger)(nil)

func (l *countingLedger) Put(ctx context.Context, c nodeipam.Claim) error {
	l.n.Add(1)
	return l.Ledger.Put(ctx, c)
}

func (l *countingLedger) Delete(ctx context.Context, node string) error {
	l.n.Add(1)
	return l.Ledger.Delete(ctx, node)
}

// prepareK8s has nothing to prepare: kube-controller-manager's range
// allocator keeps no state outside the Nodes.
func prepareK8s(testing.TB) (start, func() int64) {
	_, cluster, err := net.ParseCIDR(clusterCIDR)
	if err != nil {
		panic(err)
	}
	run := func(ctx context.Context, client kubernetes.Interface) (func(), error) {
		ctx, cancel := context.WithCancel(klog.NewContext(ctx, logr.Discard()))
		factory := informers.NewSharedInformerFactory(client, 0)
		nodes := factory.Core().V1().Nodes()
		// As the node IPAM controller does: ipam.New lists the Nodes and
		// builds the allocator, the informers start afterwards.
		a, err := ipam.New(ctx, client, nil, nodes, ipam.RangeAllocatorType, ipam.CIDRAllocatorParams{
			ClusterCIDRs: []*net.IPNet{cluster}, NodeCIDRMaskSizes: []int{nodeMask}})
		if err != nil {
			cancel()
			return nil, err
		}
		factory.Start(ctx.Done())
		var wg sync.WaitGroup
		wg.Go(func() { a.Run(ctx) })
		return func() { cancel(); wg.Wait(); factory.Shutdown() }, nil
	}
	return run, func() int64 { return 0 }
}
