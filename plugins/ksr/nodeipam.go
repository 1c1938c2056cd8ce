package ksr

import (
	"context"
	"errors"
	"sync"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/plugins/nodeipam"
)

// NodeIPAMStatus is the node pod-CIDR allocator in GET /contiv/v1/ksr.
type NodeIPAMStatus struct {
	// AllocatorType is nodeIPAM.allocatorType.
	AllocatorType nodeipam.CIDRAllocatorType `json:"allocatorType"`
	// Running is true while this replica leads and its allocator runs.
	Running bool `json:"running"`
	// Error is why the allocator could not start ("" if none).
	Error string `json:"error,omitempty"`
	// State is the range allocator's state (RangeAllocator and
	// IPAMFromCluster).
	State *nodeipam.Status `json:"state,omitempty"`
}

// statuser is an allocator that tells its state.
type statuser interface{ Status() nodeipam.Status }

// ipamBook holds the running allocator for REST; the loop goroutine sets
// it, REST reads it.
type ipamBook struct {
	mu    sync.Mutex
	alloc nodeipam.CIDRAllocator
	err   error
}

func (b *ipamBook) set(a nodeipam.CIDRAllocator, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.alloc, b.err = a, err
}

// status returns the allocator's status; nil when node IPAM is off.
func (p *Plugin) ipamStatus() *NodeIPAMStatus {
	if !p.cfg.NodeIPAM.Enabled {
		return nil
	}
	p.ipam.mu.Lock()
	a, err := p.ipam.alloc, p.ipam.err
	p.ipam.mu.Unlock()
	s := &NodeIPAMStatus{AllocatorType: p.cfg.NodeIPAM.AllocatorType, Running: a != nil}
	if err != nil {
		s.Error = err.Error()
	}
	if st, ok := a.(statuser); ok {
		state := st.Status()
		s.State = &state
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
// and runs it until ctx ends.
func (p *Plugin) runNodeIPAM(ctx context.Context, lead kvdb.Leadership) {
	cfg := p.cfg.NodeIPAM
	fence := func() []kvdb.Cmp { return []kvdb.Cmp{lead.Fence()} }
	params := nodeipam.Params{
		Client:  p.client,
		Nodes:   p.factory.Core().V1().Nodes(),
		Config:  cfg,
		Ledger:  &nodeipam.EtcdLedger{DB: p.DB, Prefix: cfg.ClaimPrefix, Fence: fence},
		Cloud:   &nodeipam.EtcdCloud{DB: p.DB, Prefix: cfg.CloudPrefix, Fence: fence},
		Metrics: p.ipamMetrics,
		Log:     p.Log.With("component", "nodeipam"),
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
