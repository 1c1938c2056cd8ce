package ksr

import (
	"context"
	"errors"
	"sync"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/plugins/nodeipam"
)

// NodeIPAMStatus is the node pod-CIDR allocator in GET /contiv/v1/ksr,
// and the pool block server.
type NodeIPAMStatus struct {
	// AllocatorType is nodeIPAM.allocatorType ("" when nodeIPAM is off
	// and only the pool block server runs).
	AllocatorType nodeipam.CIDRAllocatorType `json:"allocatorType"`
	// Running is true while this replica leads and its allocator runs.
	Running bool `json:"running"`
	// Error is why the allocator could not start ("" if none).
	Error string `json:"error,omitempty"`
	// State is the range allocator's state (RangeAllocator and
	// IPAMFromCluster); its fencedNodes are the deleted Nodes whose
	// CIDRs are kept while their agent may still use them.
	State *nodeipam.Status `json:"state,omitempty"`
	// PoolBlocks is the pool block server's state while this replica
	// leads and it runs (poolBlocks has ranges); its fencedNodes are the
	// deleted Nodes whose blocks are kept while their agent may still use
	// them.
	PoolBlocks *nodeipam.PoolBlockStatus `json:"poolBlocks,omitempty"`
}

// statuser is an allocator that tells its state.
type statuser interface{ Status() nodeipam.Status }

// ipamBook holds the running allocator and pool block server for REST;
// the goroutines that run them set them, REST reads them.
type ipamBook struct {
	mu    sync.Mutex
	alloc nodeipam.CIDRAllocator
	err   error
	pools *nodeipam.PoolBlockServer
}

func (b *ipamBook) set(a nodeipam.CIDRAllocator, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.alloc, b.err = a, err
}

func (b *ipamBook) setPools(s *nodeipam.PoolBlockServer) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pools = s
}

// ipamStatus returns the allocator's and the pool block server's status;
// nil when both are off.
func (p *Plugin) ipamStatus() *NodeIPAMStatus {
	if !p.cfg.NodeIPAM.Enabled && !p.cfg.PoolBlocks.Enabled() {
		return nil
	}
	p.ipam.mu.Lock()
	a, err, pools := p.ipam.alloc, p.ipam.err, p.ipam.pools
	p.ipam.mu.Unlock()
	s := &NodeIPAMStatus{Running: a != nil}
	if p.cfg.NodeIPAM.Enabled {
		s.AllocatorType = p.cfg.NodeIPAM.AllocatorType
	}
	if err != nil {
		s.Error = err.Error()
	}
	if st, ok := a.(statuser); ok {
		state := st.Status()
		s.State = &state
	}
	if pools != nil {
		state := pools.Status()
		s.PoolBlocks = &state
	}
	return s
}

// startNodeIPAM runs the node pod-CIDR allocator for as long as this
// leadership holds (when it is enabled); the returned function stops it
// and waits for it. Its claims are written with the leadership's fence.
func (p *Plugin) startNodeIPAM(ctx context.Context, lead kvdb.Leadership) (stop func()) {
	if !p.cfg.NodeIPAM.Enabled {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { p.runNodeIPAM(ctx, lead) })
	return func() {
		cancel()
		wg.Wait()
		p.ipam.set(nil, nil)
	}
}

// runNodeIPAM builds the allocator (retrying while the API or etcd fails)
// and runs it until ctx ends. The agents' presence keys are watched for
// as long: a deleted Node's CIDRs stay fenced while its agent is present.
func (p *Plugin) runNodeIPAM(ctx context.Context, lead kvdb.Leadership) {
	cfg := p.cfg.NodeIPAM
	fence := func() []kvdb.Cmp { return []kvdb.Cmp{lead.Fence()} }
	log := p.Log.With("component", "nodeipam")
	agents := nodeipam.NewPresenceWatch(p.DB, nil, log)
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Go(func() { agents.Run(ctx) })
	params := nodeipam.Params{
		Client:  p.client,
		Nodes:   p.factory.Core().V1().Nodes(),
		Config:  cfg,
		Ledger:  &nodeipam.EtcdLedger{DB: p.DB, Prefix: cfg.ClaimPrefix, Fence: fence},
		Cloud:   &nodeipam.EtcdCloud{DB: p.DB, Prefix: cfg.CloudPrefix, Fence: fence},
		Agents:  agents,
		Metrics: p.ipamMetrics,
		Log:     log,
	}
	backoff := minRetry
	for ctx.Err() == nil {
		a, err := nodeipam.New(ctx, params)
		if err == nil {
			p.ipam.set(a, nil)
			p.Log.Info("node CIDR allocator started", "type", cfg.AllocatorType)
			a.Run(ctx.Done())
			return
		}
		if ctx.Err() != nil || errors.Is(err, nodeipam.ErrLostLead) {
			return
		}
		p.ipam.set(nil, err)
		p.Log.Error("node CIDR allocator did not start; retrying", "retry-in", backoff, "err", err)
		p.sleep(ctx, backoff)
		backoff = min(2*backoff, maxRetry)
	}
}
