package ipam

import (
	"context"
	"errors"

	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// ConfirmAttachment implements podmanager.IPAM. Expiring reservations are
// being built (issue 15): until then no ADD returns a reservation, so
// there is nothing to confirm.
func (p *Plugin) ConfirmAttachment(_ context.Context, key podmanager.AttachmentKey, reservation string) error {
	return errors.Join(podmanager.ErrBadRequest, errors.New("reservation "+reservation+" of "+key.String()+": IPAM made no reservation"))
}
