package kvdb

import (
	"errors"
	"fmt"
)

// Limits every Broker enforces before talking to the store.
const (
	// MaxKeyLen is the longest key, in bytes, including a view's prefix.
	MaxKeyLen = 4096
	// EtcdMaxRequestBytes is etcd's default limit on one request
	// (--max-request-bytes, 1.5 MiB). contiv-ksr writes each object of the
	// Kubernetes state in one request: with that limit no value in etcd is
	// larger (the DB watcher leaves larger ones out of the bolt mirror).
	EtcdMaxRequestBytes = 3 << 19
	// MaxValueLen is the largest value, in bytes: etcd's request limit less
	// the longest key and 1 KiB for the request's framing (measured at
	// under 64 bytes for a put or a one-op txn), so that every value etcd
	// can hold fits, and every value we accept fits in one etcd put.
	MaxValueLen = EtcdMaxRequestBytes - MaxKeyLen - 1024
	// MaxTxnOps is the most cmps, and the most ops, in one Txn (etcd's
	// default --max-txn-ops).
	MaxTxnOps = 128
)

// Sentinel errors. Errors returned by a Broker wrap one of these when the
// condition applies; test with errors.Is.
var (
	// ErrClosed: the store was closed (or not initialised yet).
	ErrClosed = errors.New("kvdb: store closed")
	// ErrInvalidKey: the key is empty or longer than MaxKeyLen.
	ErrInvalidKey = errors.New("kvdb: invalid key")
	// ErrValueTooLarge: the value is longer than MaxValueLen.
	ErrValueTooLarge = errors.New("kvdb: value too large")
	// ErrInvalidTxn: a Txn has too many cmps or ops, an unknown kind or two
	// ops on one key.
	ErrInvalidTxn = errors.New("kvdb: invalid transaction")
	// ErrCompacted: a Watch's fromRev is older than the history the store
	// still holds; List again and watch from the new rev+1.
	ErrCompacted = errors.New("kvdb: revision compacted")
	// ErrUnknownOutcome: the write may have been applied, or may still be;
	// every other write error means "not applied". See "Write outcomes"
	// in the package documentation for how to resolve it.
	ErrUnknownOutcome = errors.New("kvdb: the outcome of the write is unknown")
	// ErrBusy: the store's write queue is full; the write was not queued
	// (not applied). Try again later.
	ErrBusy = errors.New("kvdb: store busy")
	// ErrStoreFailed: an error the store cannot account for (an I/O error
	// in a commit that may have reached the disk) put it out of service:
	// every call fails until the store is reopened.
	ErrStoreFailed = errors.New("kvdb: store failed")
)

// CheckKey returns an error wrapping ErrInvalidKey when key is empty or too
// long.
func CheckKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	}
	if len(key) > MaxKeyLen {
		return fmt.Errorf("%w: key %.40q... is %d bytes, more than %d", ErrInvalidKey, key, len(key), MaxKeyLen)
	}
	return nil
}

// CheckPut checks a key and the value to store under it.
func CheckPut(key string, value []byte) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if len(value) > MaxValueLen {
		return fmt.Errorf("%w: value of key %q is %d bytes, more than %d", ErrValueTooLarge, key, len(value), MaxValueLen)
	}
	return nil
}

// CheckTxn checks every cmp and op of a Txn.
func CheckTxn(cmps []Cmp, ops []Op) error {
	if len(cmps) > MaxTxnOps || len(ops) > MaxTxnOps {
		return fmt.Errorf("%w: %d cmps and %d ops, at most %d of each", ErrInvalidTxn, len(cmps), len(ops), MaxTxnOps)
	}
	for i, c := range cmps {
		if err := CheckKey(c.Key); err != nil {
			return fmt.Errorf("cmp #%d: %w", i, err)
		}
		if c.Kind < CmpValue || c.Kind > CmpModRevision {
			return fmt.Errorf("%w: cmp #%d on key %q has unknown kind %d", ErrInvalidTxn, i, c.Key, c.Kind)
		}
	}
	seen := make(map[string]struct{}, len(ops))
	for i, op := range ops {
		if err := CheckPut(op.Key, op.Value); err != nil {
			return fmt.Errorf("op #%d: %w", i, err)
		}
		if op.Kind != OpPut && op.Kind != OpDelete {
			return fmt.Errorf("%w: op #%d on key %q has unknown kind %d", ErrInvalidTxn, i, op.Key, op.Kind)
		}
		if _, dup := seen[op.Key]; dup {
			return fmt.Errorf("%w: two ops on key %q", ErrInvalidTxn, op.Key)
		}
		seen[op.Key] = struct{}{}
	}
	return nil
}
