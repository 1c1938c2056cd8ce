package keeper

import (
	"context"
	"fmt"

	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// Submit sends r to the keeper and returns once the keeper has decided r
// in memory: dec is the decision (the address, or the error). final
// waits for the durable outcome of the decision (the reply a do call
// gives): the record is durable, or the decision was undone (an error),
// or its outcome is unknown (an error wrapping errUnknownOutcome). When
// final's ctx ends first, final returns ctx's error; the outcome still
// happens, and a later call of final returns it. A request that needs no
// write (the address is held and durable already) has final == dec.
//
// The decision of a request for a pod with a write pending waits for that
// write's outcome (doc.go, rule 3), and a request queued behind a resync
// or a read waits for it. A request that may be refused (r.mayRefuse) is
// answered "try again later" at once when the keeper's queue is full; any
// other waits for room. When r.ctx ends before the decision, Submit
// returns its error, and the keeper drops the request when it comes to it.
func (k *Keeper) Submit(r *Request) (dec Reply, final func(ctx context.Context) Reply) {
	if !k.running.Load() {
		return settled(Reply{Err: ErrNotStarted})
	}
	r.dec, r.reply = make(chan Reply, 1), make(chan Reply, 1)
	ctx := r.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	if rep, ok := k.enqueue(ctx, r); !ok {
		return settled(rep)
	}
	dec = k.await(ctx, r.dec)
	return dec, func(ctx context.Context) Reply { return k.await(ctx, r.reply) }
}

// enqueue puts r in the keeper's queue; false with the answer when it
// could not.
func (k *Keeper) enqueue(ctx context.Context, r *Request) (Reply, bool) {
	if r.MayRefuse {
		select {
		case k.reqs <- r:
			return Reply{}, true
		case <-k.stopped:
			return Reply{Err: ErrClosed}, false
		default:
			k.metrics.refused.WithLabelValues("queue").Inc()
			return Reply{Err: fmt.Errorf("%w: IPAM is busy (%d requests queued)", podmanager.ErrTryAgain, cap(k.reqs))}, false
		}
	}
	select {
	case k.reqs <- r:
		return Reply{}, true
	case <-k.stopped:
		return Reply{Err: ErrClosed}, false
	case <-ctx.Done():
		return Reply{Err: fmt.Errorf("not queued: %w", context.Cause(ctx))}, false
	}
}

// settled is a submit result whose outcome is known at once.
func settled(rep Reply) (Reply, func(context.Context) Reply) {
	return rep, func(context.Context) Reply { return rep }
}

// await waits for the one reply the keeper sends on ch (buffered, one
// slot) and puts it back, so that every later await returns it too. A
// stopped keeper has answered every request it took; one it never took
// fails with errClosed.
func (k *Keeper) await(ctx context.Context, ch chan Reply) Reply {
	select {
	case rep := <-ch: // an outcome known already wins over an ended ctx
		ch <- rep
		return rep
	default:
	}
	select {
	case rep := <-ch:
		ch <- rep
		return rep
	case <-ctx.Done():
		return Reply{Err: ctx.Err()}
	case <-k.stopped:
		select {
		case rep := <-ch:
			ch <- rep
			return rep
		default:
			return Reply{Err: ErrClosed}
		}
	}
}
