package ipam

import (
	"net/netip"

	"github.com/contiv-ipam/agent/plugins/ipam/checkpoint"
	"github.com/contiv-ipam/agent/plugins/ipam/keeper"
)

// The surfaces of the pools (the AWS datastore's ENIs and elastic
// blocks; their per-address calls are in awspool.go), the checkpoints, the records moved aside and the stats: each
// a call of the keeper (see package keeper for what each does, and
// when it returns).

// Store keys and values of the pod allocations (see package keeper).
const (
	AllocationPrefix = keeper.AllocationPrefix
	AttachmentPrefix = keeper.AttachmentPrefix
	OwnerPrefix      = keeper.OwnerPrefix
	ConflictPrefix   = keeper.ConflictPrefix
	CoolingPrefix    = keeper.CoolingPrefix
	BlocksKey        = keeper.BlocksKey
	CursorKey        = keeper.CursorKey
	SecondCursorKey  = keeper.SecondCursorKey
	SchemaKey        = keeper.SchemaKey
	SchemaVersion    = keeper.SchemaVersion
	ProbeKey         = keeper.ProbeKey
	OwnerNamespace   = keeper.OwnerNamespace
	UnlistedPrefix   = keeper.UnlistedPrefix
)

// Errors of the pool, checkpoint and conflict calls (see package keeper).
var (
	ErrPoolInUse      = keeper.ErrPoolInUse
	ErrNoSuchPool     = keeper.ErrNoSuchPool
	ErrNotEmpty       = keeper.ErrNotEmpty
	ErrNoSuchConflict = keeper.ErrNoSuchConflict
	ErrCannotRestore  = keeper.ErrCannotRestore
	// ErrDuplicatePool: AddPool of a pool the node has already.
	ErrDuplicatePool = keeper.ErrDuplicatePool
	// ErrAddressInPool: AddPoolAddress of an address in its pool already.
	ErrAddressInPool = keeper.ErrAddressInPool
	// ErrAddressNotInPool: DelPoolAddress of an address not in its pool.
	ErrAddressNotInPool = keeper.ErrAddressNotInPool
	// ErrAddressInUse: DelPoolAddress without force of an assigned one.
	ErrAddressInUse = keeper.ErrAddressInUse
	// ErrSchemaTooNew: the store was written by a newer agent.
	ErrSchemaTooNew = keeper.ErrSchemaTooNew
)

// The reply types of those calls.
type (
	PodIPInfo    = keeper.PodIPInfo
	PoolStats    = keeper.PoolStats
	NodeStats    = keeper.NodeStats
	ImportResult = keeper.ImportResult
)

// AddPool adds a pod subnet to this node (see keeper.Keeper.AddPool).
func (p *Plugin) AddPool(prefix netip.Prefix) error { return p.keeper.AddPool(prefix) }

// RemovePool removes a pool added by AddPool (see keeper.Keeper.RemovePool).
func (p *Plugin) RemovePool(prefix netip.Prefix, force bool) ([]string, error) {
	return p.keeper.RemovePool(prefix, force)
}

// FreeableIPs lists the addresses of a pool that can be handed out now.
func (p *Plugin) FreeableIPs(prefix netip.Prefix) ([]netip.Addr, error) {
	return p.keeper.FreeableIPs(prefix)
}

// AllocatedIPs lists every allocated address with its allocation, pod and
// pool.
func (p *Plugin) AllocatedIPs() ([]PodIPInfo, error) { return p.keeper.AllocatedIPs() }

// Stats are the stats of every pool of this node, read after the writes
// in flight.
func (p *Plugin) Stats() (NodeStats, error) { return p.keeper.Stats() }

// ExportCheckpoint returns every allocation of this node (see
// keeper.Keeper.ExportCheckpoint).
func (p *Plugin) ExportCheckpoint() (checkpoint.Data, error) { return p.keeper.ExportCheckpoint() }

// ImportCheckpoint restores d on this node (see
// keeper.Keeper.ImportCheckpoint).
func (p *Plugin) ImportCheckpoint(d checkpoint.Data, replace bool) (ImportResult, error) {
	return p.keeper.ImportCheckpoint(d, replace)
}

// RestoreConflict puts a record moved aside back (see
// keeper.Keeper.RestoreConflict).
func (p *Plugin) RestoreConflict(name string) (string, error) { return p.keeper.RestoreConflict(name) }

// DiscardConflict deletes a record moved aside.
func (p *Plugin) DiscardConflict(name string) error { return p.keeper.DiscardConflict(name) }
