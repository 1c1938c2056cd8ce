package ipam

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/contiv-ipam/agent/plugins/ipam/keeper"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

var _ podmanager.RuntimeWitness = (*Plugin)(nil)

// UseRuntime makes the node's container runtime a witness of the pods
// (podmanager calls it from its Init when criSocket is set): a pod
// missing from Kubernetes is released only if the runtime has no sandbox
// of it; gcPeriod > 0 also releases the attachments whose sandbox two of
// its lists a period apart lack (see keeper/runtime.go).
func (p *Plugin) UseRuntime(gcPeriod time.Duration) error {
	if p.keeper == nil {
		return errors.New("ipam: UseRuntime before Init")
	}
	return p.keeper.UseRuntime(gcPeriod)
}

// LookAtRuntime takes one list of the runtime's sandboxes with list,
// noting when it began on IPAM's clock, and hands it to the keeper; it
// returns once what the list released is durable.
func (p *Plugin) LookAtRuntime(ctx context.Context, list func(context.Context) ([]podmanager.Sandbox, error)) error {
	started := p.clock.Now()
	sbs, err := list(ctx)
	released, gcErr := p.keeper.LookAtRuntime(keeper.RuntimeList{Started: started, Sandboxes: sbs, Err: err})
	if released > 0 {
		p.Log.Info("released the addresses of attachments whose sandbox the container runtime no longer has",
			"released", released)
	}
	if gcErr != nil {
		return fmt.Errorf("GC against the container runtime's list: %d released, others not: %w", released, gcErr)
	}
	return nil
}
