package ipam

import (
	"context"
	"fmt"

	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// submit sends r to the keeper and returns once the keeper has decided r
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
// other waits for room. When r.ctx ends before the decision, submit
// returns its error, and the keeper drops the request when it comes to it.
func (k *keeper) submit(r *request) (dec reply, final func(ctx context.Context) reply) {
	if !k.running.Load() {
		return settled(reply{err: errNotStarted})
	}
	r.dec, r.reply = make(chan reply, 1), make(chan reply, 1)
	ctx := r.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	if rep, ok := k.enqueue(ctx, r); !ok {
		return settled(rep)
	}
	dec = k.await(ctx, r.dec)
	return dec, func(ctx context.Context) reply { return k.await(ctx, r.reply) }
}

// enqueue puts r in the keeper's queue; false with the answer when it
// could not.
func (k *keeper) enqueue(ctx context.Context, r *request) (reply, bool) {
	if r.mayRefuse {
		select {
		case k.reqs <- r:
			return reply{}, true
		case <-k.stopped:
			return reply{err: errClosed}, false
		default:
			k.metrics.refused.WithLabelValues("queue").Inc()
			return reply{err: fmt.Errorf("%w: IPAM is busy (%d requests queued)", podmanager.ErrTryAgain, cap(k.reqs))}, false
		}
	}
	select {
	case k.reqs <- r:
		return reply{}, true
	case <-k.stopped:
		return reply{err: errClosed}, false
	case <-ctx.Done():
		return reply{err: fmt.Errorf("not queued: %w", context.Cause(ctx))}, false
	}
}

// settled is a submit result whose outcome is known at once.
func settled(rep reply) (reply, func(context.Context) reply) {
	return rep, func(context.Context) reply { return rep }
}

// await waits for the one reply the keeper sends on ch (buffered, one
// slot) and puts it back, so that every later await returns it too. A
// stopped keeper has answered every request it took; one it never took
// fails with errClosed.
func (k *keeper) await(ctx context.Context, ch chan reply) reply {
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
		return reply{err: ctx.Err()}
	case <-k.stopped:
		select {
		case rep := <-ch:
			ch <- rep
			return rep
		default:
			return reply{err: errClosed}
		}
	}
}
