package keeper

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/contiv-ipam/agent/infra/kvdb"
)

// Errors of the conflict resolution calls.
var (
	// ErrNoSuchConflict: no record is moved aside under that name.
	ErrNoSuchConflict = errors.New("no record moved aside under that name")
	// ErrCannotRestore: the record moved aside cannot be placed now (its
	// addresses are held, or not in a pod subnet or pool of this node).
	ErrCannotRestore = errors.New("the record cannot be restored")
)

// RestoreConflict puts the record moved aside under name (its key under
// ConflictPrefix, as GET /contiv/v1/ipam/conflicts lists it) back: its
// allocation holds its addresses again, stored as it was, and the copy is
// deleted, in one transaction. It is refused (ErrCannotRestore) while an
// address of it is held, or lies outside this node's pod subnets and
// pools. It returns once the change is durable.
func (k *Keeper) RestoreConflict(name string) (string, error) {
	var what string
	err := k.exec(func(t *table, _ *batch) error {
		c, v, err := k.loadConflict(name)
		if err != nil {
			return err
		}
		r, err := conflictRecord(v)
		if err != nil {
			return fmt.Errorf("conflict %q: %w: %w", name, ErrCannotRestore, err)
		}
		if !r.slotted(t) {
			return fmt.Errorf("conflict %q: %w: %s is not in a pod subnet or pool of this node (%s)", name, ErrCannotRestore, ipList(r.ips), t.blockSummary())
		}
		if winner, held := t.ownerOfAny(r.addr); held {
			return fmt.Errorf("conflict %q: %w: %s is held by %s", name, ErrCannotRestore, r.addr, winner)
		}
		if err := t.claim(r.key, r.pod, r.addr); err != nil {
			return fmt.Errorf("conflict %q: %w: %w", name, ErrCannotRestore, err)
		}
		ops := []kvdb.Op{kvdb.PutOp(r.key.storeKey(), r.raw), kvdb.DeleteOp(c)}
		if err := k.commitOps(ops); err != nil {
			t.drop(r.key)
			return fmt.Errorf("restoring conflict %q: %w", name, err)
		}
		k.acknowledged(r.pod)
		what = fmt.Sprintf("%s of pod %s holds %s again", r.key, r.pod, r.addr)
		return nil
	})
	return what, err
}

// DiscardConflict deletes the record moved aside under name: the operator
// has found that its pod no longer needs its addresses. It returns once
// the delete is durable.
func (k *Keeper) DiscardConflict(name string) error {
	return k.exec(func(*table, *batch) error {
		c, _, err := k.loadConflict(name)
		if err != nil {
			return err
		}
		return k.commitOps([]kvdb.Op{kvdb.DeleteOp(c)})
	})
}

// loadConflict reads the record moved aside under name: its store key
// and value.
func (k *Keeper) loadConflict(name string) (string, conflictValue, error) {
	var v conflictValue
	if name == "" || strings.Contains(name, "..") {
		return "", v, fmt.Errorf("conflict %q: %w", name, ErrNoSuchConflict)
	}
	key := ConflictPrefix + name
	if k.db == nil {
		return "", v, fmt.Errorf("conflict %q: %w (no store)", name, ErrNoSuchConflict)
	}
	ctx, cancel := k.ctx()
	defer cancel()
	kv, found, err := k.db.Get(ctx, key)
	switch {
	case err != nil:
		return "", v, fmt.Errorf("reading conflict %q: %w", name, err)
	case !found:
		return "", v, fmt.Errorf("conflict %q: %w", name, ErrNoSuchConflict)
	}
	if err := json.Unmarshal(kv.Value, &v); err != nil {
		return key, v, fmt.Errorf("conflict %q: value %.80q: not a record moved aside: %w", name, kv.Value, err)
	}
	return key, v, nil
}

// conflictRecord parses the record a conflict keeps.
func conflictRecord(v conflictValue) (record, error) {
	if v.Key == "" {
		return record{}, errors.New("it was moved aside without a copy of its record (by an older agent): discard it")
	}
	for _, src := range recordSources {
		if strings.HasPrefix(v.Key, src.prefix) {
			r, err := src.parse(v.Key, []byte(v.Value))
			r.raw = []byte(v.Value)
			return r, err
		}
	}
	return record{}, fmt.Errorf("key %q is not a pod allocation's", v.Key)
}

// commitOps stores ops in one transaction (a barrier: nothing else is in
// flight) and returns its error when it is not durable.
func (k *Keeper) commitOps(ops []kvdb.Op) error {
	ws := make([]write, len(ops))
	for i, op := range ops {
		ws[i] = write{op: op, done: func(outcome, error) {}}
	}
	return k.commitInOrder(ws)
}

// Conflict is a record moved aside in GET /contiv/v1/ipam/conflicts: Name
// identifies it for the resolve call, Key and Value are the record as it
// was stored, Reason why a restore could not place it.
type Conflict struct {
	Name        string   `json:"name"`
	PodID       PodName  `json:"PodID"`
	IP          string   `json:"ip"`
	IPs         []string `json:"ips,omitempty"`
	KeptFor     string   `json:"keptFor"`
	Reason      string   `json:"reason,omitempty"`
	At          string   `json:"at"`
	Key         string   `json:"key,omitempty"`
	Value       string   `json:"value,omitempty"`
	Network     string   `json:"network,omitempty"`
	ContainerID string   `json:"containerId,omitempty"`
	IfName      string   `json:"ifName,omitempty"`
}

// DecodeConflict decodes a record moved aside.
func DecodeConflict(key string, value []byte) Conflict {
	var v conflictValue
	if json.Unmarshal(value, &v) != nil {
		v.IP = "unreadable: " + string(value)
	}
	c := Conflict{Name: strings.TrimPrefix(key, ConflictPrefix), IP: v.IP, KeptFor: v.KeptFor, Reason: v.Reason, At: v.At,
		Key: v.Key, Value: v.Value, Network: v.Network, ContainerID: v.ContainerID, IfName: v.IfName}
	for _, a := range v.IPs {
		c.IPs = append(c.IPs, a.String())
	}
	if v.Pod != nil {
		c.PodID = *v.Pod
		return c
	}
	ns, name, _ := strings.Cut(strings.TrimPrefix(key, ConflictPrefix), "/")
	c.PodID = PodName{Name: name, Namespace: ns}
	return c
}
