package keeper

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/contiv-ipam/agent/infra/kvdb"
)

// SchemaKey holds the version of the layout of the IPAM records in the
// local store (a decimal number).
const SchemaKey = "/contiv-agent/ipam/schema"

// SchemaVersion is the layout this code reads and writes:
//
//	v1 (no SchemaKey): AllocationPrefix + "<ns>/<name>" -> the address;
//	   CursorKey; ConflictPrefix records.
//	v2: v1's keys, which hold the pod-keyed allocations unchanged, plus
//	   AttachmentPrefix records (JSON) for the attachment-keyed ones.
//	v3: v2's records are v3 records as they are; v3 adds a second
//	   address per record (dual-stack: "a,b" in a pod-keyed value, "ips"
//	   in an attachment record), the "reservation" of an expiring
//	   allocation, OwnerPrefix records (the Cilium-style API) and
//	   SecondCursorKey. A v2 agent would drop what it cannot read, so it
//	   must refuse a v3 store: hence the new version.
const SchemaVersion = 3

// ErrSchemaTooNew: the local store was written by a newer agent; this
// one refuses to start rather than overwrite what it cannot read.
var ErrSchemaTooNew = errors.New("the local store has a newer IPAM layout than this agent supports")

// checkSchema reads SchemaKey at the first resync (the store file is
// locked by this process: its version cannot change later). A store
// without it is v1 (or new) and is migrated to v2 in one transaction; a
// newer or unreadable version is an error naming the key, the version
// found and the supported one.
func (k *Keeper) checkSchema() error {
	if k.tab != nil {
		return nil // checked by the resync that built the table
	}
	ctx, cancel := k.ctx()
	defer cancel()
	kv, found, err := k.db.Get(ctx, SchemaKey)
	if err != nil {
		return fmt.Errorf("reading the IPAM schema version %s: %w", SchemaKey, err)
	}
	if !found {
		return k.migrate(1, kvdb.IfAbsent(SchemaKey))
	}
	v, err := strconv.Atoi(string(kv.Value))
	switch {
	case err != nil || v < 1:
		return fmt.Errorf("IPAM schema version %s = %.40q: not a version (this agent supports %d)", SchemaKey, kv.Value, SchemaVersion)
	case v > SchemaVersion:
		return fmt.Errorf("IPAM schema version %s = %d, this agent supports %d: %w", SchemaKey, v, SchemaVersion, ErrSchemaTooNew)
	case v < SchemaVersion:
		return k.migrate(v, kvdb.IfValue(SchemaKey, kv.Value))
	}
	return nil
}

// migrate turns a store of version from (1: no SchemaKey) into the
// current one. Older records are current records as they are (v1's are
// v2's pod-keyed records, v2's are v3's), so no record is rewritten: one
// transaction writes SchemaKey, on condition that it is still what was
// read (cond). Records that do not parse stay where they are and are
// reported at load, as in any version. When the transaction fails
// nothing changed: the plugin serves the records it read, and the next
// start migrates.
func (k *Keeper) migrate(from int, cond kvdb.Cmp) error {
	ctx, cancel := k.ctx()
	defer cancel()
	kvs, _, err := k.db.List(ctx, AllocationPrefix)
	if err != nil {
		return fmt.Errorf("migrating the IPAM records to schema %d: reading %s: %w", SchemaVersion, AllocationPrefix, err)
	}
	ok, err := k.db.Txn(ctx, []kvdb.Cmp{cond},
		[]kvdb.Op{kvdb.PutOp(SchemaKey, []byte(strconv.Itoa(SchemaVersion)))})
	if err != nil {
		// Nothing changed (one transaction), and v1 records read as v2:
		// serve, and migrate at the next start.
		k.log.Warn("migrating the IPAM records failed; the next start migrates them", "to-schema", SchemaVersion,
			"key", SchemaKey, "error", err)
		return nil
	}
	if !ok {
		return k.checkSchema() // written meanwhile: check what is there
	}
	k.log.Info("IPAM records migrated", "from-schema", from, "to-schema", SchemaVersion, "pod-records", len(kvs), "key", SchemaKey)
	return nil
}
