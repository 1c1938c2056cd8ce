package ipam

import "context"

// submit sends r to the keeper and returns once the keeper has decided r
// in memory: dec is the decision (the address, or the error). final
// waits for the durable outcome of the decision (the reply a do call
// would give).
//
// This first version waits for the durable outcome before it returns;
// the pipelined keeper answers the decision first.
//
//lint:ignore U1000 the AddPod handler uses it (issue 10, in progress)
func (k *keeper) submit(r *request) (dec reply, final func(ctx context.Context) reply) {
	rep := k.do(r)
	return rep, func(context.Context) reply { return rep }
}
