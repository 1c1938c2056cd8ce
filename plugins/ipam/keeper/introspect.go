package keeper

// What other goroutines may see of the keeper's work (tests, status):
// read without waiting for the keeper.

// MaxHeldRequests bounds the requests the keeper holds undecided: its
// queue, its deferred list, a barrier and a due sweep.
const MaxHeldRequests = queueLen + maxDeferred + 2

// QueuedRequests is the number of requests waiting for the keeper: queued
// in its channel, or taken and waiting undecided (deferred behind a write
// of their pod, a barrier); a sweep waiting for the writes in flight
// counts as one.
func (k *Keeper) QueuedRequests() int { return len(k.reqs) + int(k.pipe.waiting.Load()) }

// WritesInFlight is the number of transactions the keeper handed to the
// store whose outcome it has not settled yet.
func (k *Keeper) WritesInFlight() int { return int(k.pipe.flightCount.Load()) }

// Closing tells whether Close has begun.
func (k *Keeper) Closing() bool { return k.stopping() }
