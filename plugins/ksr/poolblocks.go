package ksr

import (
	"context"
	"errors"
	"sync"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/plugins/nodeipam"
)

// startPoolBlocks runs the pool block server for as long as this
// leadership holds (when poolBlocks has ranges); the returned function
// stops it and waits for it. Its grants are written with the
// leadership's fence; REST shows its status while it runs.
func (p *Plugin) startPoolBlocks(ctx context.Context, lead kvdb.Leadership) (stop func()) {
	if !p.cfg.PoolBlocks.Enabled() {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { p.runPoolBlocks(ctx, lead) })
	return func() {
		cancel()
		wg.Wait()
	}
}

// runPoolBlocks builds and starts the server (retrying while etcd fails)
// and runs it until ctx ends or a write finds the lead lost.
func (p *Plugin) runPoolBlocks(ctx context.Context, lead kvdb.Leadership) {
	params := nodeipam.PoolBlockParams{
		DB:           p.DB,
		Fence:        func() []kvdb.Cmp { return []kvdb.Cmp{lead.Fence()} },
		Client:       p.client,
		Nodes:        p.factory.Core().V1().Nodes(),
		Config:       p.cfg.PoolBlocks,
		InitialRetry: p.cfg.NodeIPAM.InitialRetry,
		MaxBackoff:   p.cfg.NodeIPAM.MaxBackoff,
		Metrics:      p.poolMetrics,
		Log:          p.Log.With("component", "poolblocks"),
	}
	backoff := minRetry
	for ctx.Err() == nil {
		s, err := nodeipam.NewPoolBlockServer(params)
		if err == nil {
			err = s.Start(ctx)
		}
		if err == nil {
			p.ipam.setPools(s)
			if err := s.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				p.Log.Warn("pool block server stopped", "err", err)
			}
			p.ipam.setPools(nil)
			return
		}
		if ctx.Err() != nil {
			return
		}
		p.Log.Error("pool block server did not start; retrying", "retry-in", backoff, "err", err)
		p.sleep(ctx, backoff)
		backoff = min(2*backoff, maxRetry)
	}
}
