package etcd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/contiv-ipam/agent/infra/kvdb"
)

var _ kvdb.PresenceStore = (*Plugin)(nil)

// claimRounds bounds the create-or-take-over transactions of one
// ClaimPresence: a round is lost only when the key changed between two
// transactions of the same call.
const claimRounds = 3

// ClaimPresence implements kvdb.PresenceStore: grant a lease, then in one
// transaction create key bound to it if absent, else read it; a key that
// holds exactly value is moved to the new lease with a second transaction
// on its mod revision. The keep-alive runs on a goroutine the
// plugin tracks, until Release, the lease's loss or Close.
func (p *Plugin) ClaimPresence(ctx context.Context, key string, value []byte, ttl time.Duration) (kvdb.Presence, error) {
	return p.claimPresence(ctx, key, value, ttl, 0)
}

// TakeOverPresence implements kvdb.PresenceStore: ClaimPresence, where a
// key still at mod revision rev is also moved to the new lease, with
// value, by the same transaction on its mod revision. rev 0 takes over
// nothing (etcd revisions start at 1).
func (p *Plugin) TakeOverPresence(ctx context.Context, key string, value []byte, ttl time.Duration, rev int64) (kvdb.Presence, error) {
	return p.claimPresence(ctx, key, value, ttl, rev)
}

// claimPresence is ClaimPresence taking over a key at mod revision
// stale (0: none).
func (p *Plugin) claimPresence(ctx context.Context, key string, value []byte, ttl time.Duration, stale int64) (kvdb.Presence, error) {
	if err := kvdb.CheckPresence(key, value, ttl); err != nil {
		return nil, err
	}
	cli, err := p.client("presence", key)
	if err != nil {
		return nil, err
	}
	lease, err := p.grant(ctx, cli, key, ttl)
	if err != nil {
		return nil, err
	}
	if err := p.bindPresence(ctx, cli, key, value, lease, stale); err != nil {
		p.revokeQuietly(cli, lease)
		return nil, err
	}
	pres, err := p.keepPresence(cli, key, lease)
	if err != nil {
		p.revokeQuietly(cli, lease)
		return nil, err
	}
	return pres, nil
}

// grant creates a lease of ttl rounded up to whole seconds.
func (p *Plugin) grant(ctx context.Context, cli *clientv3.Client, key string, ttl time.Duration) (clientv3.LeaseID, error) {
	ctx, cancel := p.opCtx(ctx)
	defer cancel()
	resp, err := cli.Grant(ctx, int64(math.Ceil(ttl.Seconds())))
	if err != nil {
		return 0, p.wrap("grant lease for presence", key, err)
	}
	return resp.ID, nil
}

// bindPresence puts key=value on lease if key is absent, holds value, or
// is at mod revision stale (when stale is not 0).
func (p *Plugin) bindPresence(ctx context.Context, cli *clientv3.Client, key string, value []byte, lease clientv3.LeaseID, stale int64) error {
	for range claimRounds {
		held, err := p.createPresence(ctx, cli, key, value, lease)
		if err != nil || held == nil {
			return err
		}
		if !bytes.Equal(held.Value, value) && (stale == 0 || held.ModRevision != stale) {
			return &kvdb.PresenceHeldError{Key: key, Holder: nonNil(held.Value), Revision: held.ModRevision,
				TTL: p.remainingTTL(ctx, cli, held.Lease)}
		}
		moved, err := p.movePresence(ctx, cli, key, value, held.ModRevision, lease)
		if err != nil || moved {
			return err
		}
	}
	return fmt.Errorf("etcd presence %q: the key changed during each of %d attempts", key, claimRounds)
}

// createPresence creates key on lease if absent; held is the existing key
// otherwise.
func (p *Plugin) createPresence(ctx context.Context, cli *clientv3.Client, key string, value []byte, lease clientv3.LeaseID) (held *kvKey, err error) {
	ctx, cancel := p.opCtx(ctx)
	defer cancel()
	resp, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(value), clientv3.WithLease(lease))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return nil, p.wrap("presence", key, err)
	}
	if resp.Succeeded {
		return nil, nil
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 { // cannot happen: the compare saw the key in the same revision
		return nil, fmt.Errorf("etcd presence %q: the key exists but was not returned", key)
	}
	return &kvKey{Value: kvs[0].Value, ModRevision: kvs[0].ModRevision, Lease: clientv3.LeaseID(kvs[0].Lease)}, nil
}

// kvKey is what ClaimPresence needs of an existing key.
type kvKey struct {
	Value       []byte
	ModRevision int64
	Lease       clientv3.LeaseID
}

// movePresence puts key=value on lease if key is still at mod revision
// rev: the holder's own key, or a dead holder's key being taken over.
// false when the key changed meanwhile (nothing written).
func (p *Plugin) movePresence(ctx context.Context, cli *clientv3.Client, key string, value []byte, rev int64, lease clientv3.LeaseID) (bool, error) {
	ctx, cancel := p.opCtx(ctx)
	defer cancel()
	resp, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
		Then(clientv3.OpPut(key, string(value), clientv3.WithLease(lease))).
		Commit()
	if err != nil {
		return false, p.wrap("presence take-over", key, err)
	}
	return resp.Succeeded, nil
}

// remainingTTL is what remains of lease; negative for no lease, 0 when it
// already expired or cannot be read.
func (p *Plugin) remainingTTL(ctx context.Context, cli *clientv3.Client, lease clientv3.LeaseID) time.Duration {
	if lease == clientv3.NoLease {
		return -1
	}
	ctx, cancel := p.opCtx(ctx)
	defer cancel()
	resp, err := cli.TimeToLive(ctx, lease)
	if err != nil || resp.TTL < 0 {
		return 0
	}
	return time.Duration(resp.TTL) * time.Second
}

// keepPresence starts the keep-alive of lease and the goroutine that closes
// Lost when it ends.
func (p *Plugin) keepPresence(cli *clientv3.Client, key string, lease clientv3.LeaseID) (*presence, error) {
	kaCtx, stop := context.WithCancel(p.life)
	ch, err := cli.KeepAlive(kaCtx, lease)
	if err != nil {
		stop()
		return nil, p.wrap("presence keep-alive", key, err)
	}
	pres := &presence{p: p, key: key, lease: lease, stop: stop, lost: make(chan struct{})}
	started := p.goTracked(func(context.Context) {
		defer close(pres.lost)
		for range ch { // the client closes ch when the lease is lost or kaCtx ends
		}
	})
	if !started {
		stop()
		return nil, fmt.Errorf("etcd presence %q: %w", key, kvdb.ErrClosed)
	}
	return pres, nil
}

// revokeQuietly revokes a lease nobody will use; a failure only leaves it
// to expire.
func (p *Plugin) revokeQuietly(cli *clientv3.Client, lease clientv3.LeaseID) {
	ctx, cancel := p.opCtx(context.Background())
	defer cancel()
	if _, err := cli.Revoke(ctx, lease); err != nil {
		p.Log.Debug("revoking an unused presence lease failed; it expires by itself", "lease", int64(lease), "err", err)
	}
}

// presence is the kvdb.Presence of ClaimPresence.
type presence struct {
	p     *Plugin
	key   string
	lease clientv3.LeaseID
	stop  context.CancelFunc
	lost  chan struct{}
	once  sync.Once
}

var _ kvdb.Presence = (*presence)(nil)

// Key implements kvdb.Presence.
func (s *presence) Key() string { return s.key }

// Lost implements kvdb.Presence.
func (s *presence) Lost() <-chan struct{} { return s.lost }

// Release implements kvdb.Presence.
func (s *presence) Release(ctx context.Context) error {
	var err error
	s.once.Do(func() {
		s.stop()
		cli, cerr := s.p.client("presence release", s.key)
		if cerr != nil {
			err = cerr
			return
		}
		ctx, cancel := s.p.opCtx(ctx)
		defer cancel()
		if _, rerr := cli.Revoke(ctx, s.lease); rerr != nil && !errors.Is(rerr, rpctypes.ErrLeaseNotFound) {
			err = s.p.wrap("presence release", s.key, rerr)
		}
	})
	return err
}
