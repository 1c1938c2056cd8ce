package ipam

import (
	"context"
	"encoding/json"
	"time"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	"github.com/contiv-ipam/agent/plugins/ksr/model/poolblock"
)

// PoolClaimer writes this node's pool claim (poolblock.ClaimKey in etcd);
// the agent wires it. Put may be called again with a newer claim at any
// time; the last one is what counts.
type PoolClaimer interface {
	PutClaim(ctx context.Context, c poolblock.Claim) error
}

// runClaimer sends the claims the keeper decides, newest first, until ctx
// ends; a failed write is retried with backoff (a newer claim replaces
// the one being retried).
func (p *Plugin) runClaimer(ctx context.Context, claims <-chan poolblock.Claim) {
	var pending *poolblock.Claim
	retry := time.Duration(0)
	for {
		var timer <-chan time.Time
		if pending != nil {
			timer = time.After(retry)
		}
		select {
		case <-ctx.Done():
			return
		case c := <-claims:
			pending, retry = &c, 0
			continue
		case <-timer:
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := p.PoolClaims.PutClaim(cctx, *pending)
		cancel()
		if err == nil {
			p.Log.Info("pool claim written", "want", pending.Want, "release", pending.Release)
			pending = nil
			continue
		}
		retry = min(max(2*retry, 250*time.Millisecond), 10*time.Second)
		p.Log.Warn("writing the pool claim failed; retrying", "in", retry.String(), "error", err)
	}
}

// StoreClaimer writes claims into a key-value store (etcd, as the agent
// wires it): the JSON claim under codec.KSRPrefix + poolblock.ClaimKey.
type StoreClaimer struct {
	DB kvdb.Store
}

var _ PoolClaimer = StoreClaimer{}

// PutClaim implements PoolClaimer.
func (s StoreClaimer) PutClaim(ctx context.Context, c poolblock.Claim) error {
	v, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return s.DB.Put(ctx, codec.KSRPrefix+poolblock.ClaimKey(c.Node), v)
}
