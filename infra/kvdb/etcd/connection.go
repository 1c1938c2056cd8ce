package etcd

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/contiv-ipam/agent/infra/health"
)

// connection is the connection state machine and its callbacks.
type connection struct {
	mu          sync.Mutex
	probed      bool  // at least one probe finished
	up          bool  // the last probe succeeded
	connected   bool  // a probe has ever succeeded (OnConnect queue flushed)
	lastErr     error // error of the last probe
	onConnect   []func() error
	onReconnect []func()
}

// transition is what one probe result changed.
type transition int

const (
	noChange     transition = iota
	firstConnect            // the first successful probe
	reconnected             // success after a failure
	lost                    // failure after success, or the first probe failed
)

// update records a probe result and returns the transition and the
// callbacks the caller must run (outside the lock).
func (c *connection) update(err error) (transition, []func() error, []func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	wasProbed, wasUp := c.probed, c.up
	c.probed, c.up, c.lastErr = true, err == nil, err
	switch {
	case err == nil && !c.connected:
		c.connected = true
		queued := c.onConnect
		c.onConnect = nil
		return firstConnect, queued, nil
	case err == nil && !wasUp:
		return reconnected, nil, slices.Clone(c.onReconnect)
	case err != nil && (wasUp || !wasProbed):
		return lost, nil, nil
	}
	return noChange, nil, nil
}

// state is the probe registered with the health reporter: the result of
// the last connection probe (no network call).
func (c *connection) state() (health.State, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case !c.probed:
		return health.Init, nil
	case c.up:
		return health.OK, nil
	}
	return health.Error, c.lastErr
}

func (c *connection) isUp() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.up
}

// OnConnect runs fn now if a connection was ever established, else queues
// it until the monitor's first successful probe. An error from fn is logged.
func (p *Plugin) OnConnect(fn func() error) {
	p.conn.mu.Lock()
	if !p.conn.connected {
		p.conn.onConnect = append(p.conn.onConnect, fn)
		p.conn.mu.Unlock()
		return
	}
	p.conn.mu.Unlock()
	p.runOnConnect(fn)
}

// OnReconnect registers fn, called on the monitor goroutine each time a
// probe succeeds after a failed one, when resync-after-reconnect is set.
func (p *Plugin) OnReconnect(fn func()) {
	p.conn.mu.Lock()
	defer p.conn.mu.Unlock()
	p.conn.onReconnect = append(p.conn.onReconnect, fn)
}

func (p *Plugin) runOnConnect(fn func() error) {
	if err := fn(); err != nil {
		p.Log.Error("OnConnect callback failed", "err", err)
	}
}

// probe reads the probe key within dial-timeout and checks the answer's
// identity (identity.go): a replaced store is found within one probe.
func (p *Plugin) probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.DialTimeout)
	defer cancel()
	m := p.ident.mark()
	resp, err := p.cli.Get(ctx, p.probeKey, clientv3.WithCountOnly())
	if err != nil {
		return err
	}
	p.answered(m, resp.Header, true)
	return nil
}

// monitor probes every probe-interval while connected and every
// reconnect-interval while not, and reports the replacements of the store
// found (OnStoreReplaced), until ctx ends.
func (p *Plugin) monitor(ctx context.Context) {
	for {
		interval := p.cfg.ProbeInterval
		if !p.conn.isUp() {
			interval = p.cfg.ReconnectInterval
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case r := <-p.replaced:
			t.Stop()
			p.reportReplaced(r)
			continue
		case <-t.C:
		}
		err := p.probe(ctx)
		if ctx.Err() != nil {
			return
		}
		p.apply(p.conn.update(err))
	}
}

// apply logs and reports a transition and runs its callbacks.
func (p *Plugin) apply(tr transition, onConnect []func() error, onReconnect []func()) {
	state, err := p.conn.state()
	switch tr {
	case noChange:
		return
	case firstConnect:
		p.Log.Info("connected", "endpoints", p.cfg.Endpoints)
	case reconnected:
		p.Log.Info("reconnected", "endpoints", p.cfg.Endpoints, "resync", p.cfg.ResyncAfterReconnect)
	case lost:
		p.Log.Warn("etcd unreachable", "endpoints", p.cfg.Endpoints, "err", err)
	}
	if p.StatusCheck != nil {
		p.StatusCheck.ReportStateChange(p.String(), state, err)
	}
	for _, fn := range onConnect {
		p.runOnConnect(fn)
	}
	if p.cfg.ResyncAfterReconnect {
		for _, fn := range onReconnect {
			fn()
		}
	}
}

// autoCompact compacts to the current revision every auto-compact period.
func (p *Plugin) autoCompact(ctx context.Context) {
	t := time.NewTicker(p.cfg.AutoCompact)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if rev, err := p.compact(ctx); err != nil && ctx.Err() == nil {
				p.Log.Warn("auto-compact failed", "err", err)
			} else if err == nil {
				p.Log.Info("compacted", "revision", rev)
			}
		}
	}
}

// compact discards the history before the current revision.
func (p *Plugin) compact(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.OperationTimeout)
	defer cancel()
	resp, err := p.cli.Get(ctx, p.probeKey, clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	rev := resp.Header.Revision
	if _, err := p.cli.Compact(ctx, rev); err != nil {
		return 0, fmt.Errorf("compact to revision %d: %w", rev, err)
	}
	return rev, nil
}
