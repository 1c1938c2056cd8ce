package ipam

import (
	"fmt"
	"net/netip"

	"github.com/contiv-ipam/agent/plugins/ipam/checkpoint"
)

// The per-address calls of the pools (the AWS datastore's secondary
// addresses of an ENI) and the checkpoint calls over a Checkpointer (its
// backing store): each a call of the keeper (see keeper/awspool.go) or of
// the export and import.

// AddEmptyPool adds a pod subnet to this node with none of its addresses
// (see keeper.Keeper.AddEmptyPool).
func (p *Plugin) AddEmptyPool(prefix netip.Prefix) error { return p.keeper.AddEmptyPool(prefix) }

// AddPoolAddress adds an address to its added pool (see
// keeper.Keeper.AddPoolAddress).
func (p *Plugin) AddPoolAddress(pool netip.Prefix, a netip.Addr) error {
	return p.keeper.AddPoolAddress(pool, a)
}

// DelPoolAddress deletes an address from its added pool, refused while
// assigned unless force (see keeper.Keeper.DelPoolAddress).
func (p *Plugin) DelPoolAddress(pool netip.Prefix, a netip.Addr, force bool) ([]string, error) {
	return p.keeper.DelPoolAddress(pool, a, force)
}

// PoolAddresses lists the addresses of an added pool (see
// keeper.Keeper.PoolAddresses).
func (p *Plugin) PoolAddresses(pool netip.Prefix) ([]netip.Addr, error) {
	return p.keeper.PoolAddresses(pool)
}

// RemoveUnusedPool removes one added pool that nothing uses (see
// keeper.Keeper.RemoveUnusedPool).
func (p *Plugin) RemoveUnusedPool(warmTarget, minimumTarget int) (netip.Prefix, error) {
	return p.keeper.RemoveUnusedPool(warmTarget, minimumTarget)
}

// SaveCheckpoint takes the checkpoint of this node (ExportCheckpoint)
// and keeps it in c.
func (p *Plugin) SaveCheckpoint(c checkpoint.Checkpointer) error {
	d, err := p.ExportCheckpoint()
	if err != nil {
		return err
	}
	return c.Checkpoint(d)
}

// RestoreCheckpoint imports the checkpoint c keeps (ImportCheckpoint,
// with replace); checkpoint.ErrNoCheckpoint when it keeps none.
func (p *Plugin) RestoreCheckpoint(c checkpoint.Checkpointer, replace bool) (ImportResult, error) {
	var d checkpoint.Data
	if err := c.Restore(&d); err != nil {
		return ImportResult{}, fmt.Errorf("restoring a checkpoint: %w", err)
	}
	return p.ImportCheckpoint(d, replace)
}
