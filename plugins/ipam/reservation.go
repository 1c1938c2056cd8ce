package ipam

import (
	"context"
	"fmt"

	"github.com/contiv-ipam/agent/plugins/ipam/keeper"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// ConfirmAttachment implements podmanager.IPAM: the reservation of key's
// allocation ends, and its addresses stay until a DEL. It returns once
// the confirmation is durable.
func (p *Plugin) ConfirmAttachment(ctx context.Context, key podmanager.AttachmentKey, reservation string) error {
	if err := keeper.CheckAttachment(key); err != nil {
		return err
	}
	if reservation == "" {
		return fmt.Errorf("confirming %s: the reservation is empty: %w", key, podmanager.ErrBadRequest)
	}
	_, final := p.keeper.Submit(&keeper.Request{Kind: keeper.ReqConfirm, Key: key, Resv: reservation, Ctx: ctx, MayRefuse: true})
	return p.cniError(final(ctx).Err)
}
