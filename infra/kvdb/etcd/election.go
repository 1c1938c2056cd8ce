package etcd

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/contiv-ipam/agent/infra/kvdb"
)

var _ kvdb.ElectionStore = (*Plugin)(nil)

// Campaign implements kvdb.ElectionStore with etcd's election recipe
// (go.etcd.io/etcd/client/v3/concurrency): a session of ttl, a key under
// prefix+"/" bound to it, and the wait until every older key is gone. The
// session and the goroutine that watches the leadership are tracked by
// the plugin and end at Close at the latest.
func (p *Plugin) Campaign(ctx context.Context, prefix string, value []byte, ttl time.Duration) (kvdb.Leadership, error) {
	if err := kvdb.CheckCampaign(prefix, value, ttl); err != nil {
		return nil, err
	}
	cli, err := p.client("campaign", prefix)
	if err != nil {
		return nil, err
	}
	life, stop := context.WithCancel(p.life)
	secs := int(math.Ceil(ttl.Seconds()))
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(secs), concurrency.WithContext(life))
	if err != nil {
		stop()
		return nil, p.wrap("campaign: session", prefix, err)
	}
	l := &leadership{p: p, session: s, stop: stop, done: make(chan struct{})}
	l.election = concurrency.NewElection(s, prefix)
	if err := l.election.Campaign(ctx, string(value)); err != nil {
		l.end()
		return nil, p.wrap("campaign", prefix, err)
	}
	if err := l.pinFence(ctx); err != nil {
		l.end()
		return nil, err
	}
	if !p.goTracked(l.watch) {
		l.end()
		return nil, fmt.Errorf("etcd campaign %q: %w", prefix, kvdb.ErrClosed)
	}
	return l, nil
}

// Leader implements kvdb.ElectionStore: the value of the oldest key under
// prefix+"/", which is the leader's.
func (p *Plugin) Leader(ctx context.Context, prefix string) ([]byte, bool, error) {
	cli, err := p.client("leader", prefix)
	if err != nil {
		return nil, false, err
	}
	ctx, cancel := p.opCtx(ctx)
	defer cancel()
	resp, err := cli.Get(ctx, prefix+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return nil, false, p.wrap("leader", prefix, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, false, nil
	}
	return nonNil(resp.Kvs[0].Value), true, nil
}

// leadership is the kvdb.Leadership of Campaign.
type leadership struct {
	p        *Plugin
	session  *concurrency.Session
	election *concurrency.Election
	stop     context.CancelFunc // ends the session's keep-alive

	key string // the leader key
	rev int64  // its mod revision when the lead was won

	done     chan struct{}
	doneOnce sync.Once
	resign   sync.Once
}

var _ kvdb.Leadership = (*leadership)(nil)

// pinFence reads the leader key's mod revision: the fence compares it.
func (l *leadership) pinFence(ctx context.Context) error {
	l.key = l.election.Key()
	ctx, cancel := l.p.opCtx(ctx)
	defer cancel()
	resp, err := l.session.Client().Get(ctx, l.key)
	if err != nil {
		return l.p.wrap("campaign: read leader key", l.key, err)
	}
	if len(resp.Kvs) == 0 {
		return fmt.Errorf("etcd campaign: leader key %q vanished as the lead was won", l.key)
	}
	l.rev = resp.Kvs[0].ModRevision
	return nil
}

// watch closes done when the session ends or the leader key changes.
func (l *leadership) watch(life context.Context) {
	defer l.lose()
	ctx, cancel := context.WithCancel(life)
	defer cancel()
	wch := l.session.Client().Watch(ctx, l.key, clientv3.WithRev(l.rev+1))
	for {
		select {
		case <-l.session.Done():
			return
		case <-l.done:
			return
		case resp, ok := <-wch:
			if !ok || resp.Err() != nil || len(resp.Events) > 0 {
				return // the key changed or went, or the watch broke: be safe
			}
		}
	}
}

// lose closes done once.
func (l *leadership) lose() { l.doneOnce.Do(func() { close(l.done) }) }

// end closes the session (revoking its lease) and stops its keep-alive.
func (l *leadership) end() {
	l.lose()
	l.stop()
	if err := l.session.Close(); err != nil && !errors.Is(err, context.Canceled) {
		l.p.Log.Debug("closing an election session failed; its lease expires by itself", "err", err)
	}
}

// Fence implements kvdb.Leadership.
func (l *leadership) Fence() kvdb.Cmp { return kvdb.IfModRevision(l.key, l.rev) }

// Done implements kvdb.Leadership.
func (l *leadership) Done() <-chan struct{} { return l.done }

// Resign implements kvdb.Leadership.
func (l *leadership) Resign(ctx context.Context) error {
	var err error
	l.resign.Do(func() {
		ctx, cancel := l.p.opCtx(ctx)
		defer cancel()
		if rerr := l.election.Resign(ctx); rerr != nil {
			err = l.p.wrap("resign", l.key, rerr)
		}
		l.end()
	})
	return err
}
