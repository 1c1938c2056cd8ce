package kvdb

import (
	"context"
	"strings"
)

// WithPrefix returns a view of b that prepends prefix to every key argument
// (in Put, Get, List, Delete, Watch and inside Txn cmps and ops) and strips
// it from every key it returns (Get, List and watch events). Keys given to
// the view must be non-empty. A view of a view concatenates the prefixes; an
// empty prefix returns b itself.
//
// This is the only place prefixes are handled: stores implement
// Store.NewBroker with it.
func WithPrefix(b Broker, prefix string) Broker {
	if prefix == "" {
		return b
	}
	if v, ok := b.(*prefixed); ok {
		return &prefixed{inner: v.inner, prefix: v.prefix + prefix}
	}
	return &prefixed{inner: b, prefix: prefix}
}

// prefixed is the view built by WithPrefix.
type prefixed struct {
	inner  Broker
	prefix string
}

var _ Broker = (*prefixed)(nil)

func (p *prefixed) full(key string) (string, error) {
	if err := CheckKey(key); err != nil {
		return "", err
	}
	return p.prefix + key, nil
}

func (p *prefixed) strip(key string) string { return strings.TrimPrefix(key, p.prefix) }

// Put stores value under prefix+key.
func (p *prefixed) Put(ctx context.Context, key string, value []byte) error {
	full, err := p.full(key)
	if err != nil {
		return err
	}
	return p.inner.Put(ctx, full, value)
}

// Get reads prefix+key and returns it as key.
func (p *prefixed) Get(ctx context.Context, key string) (KeyValue, bool, error) {
	full, err := p.full(key)
	if err != nil {
		return KeyValue{}, false, err
	}
	kv, found, err := p.inner.Get(ctx, full)
	if found {
		kv.Key = p.strip(kv.Key)
	}
	return kv, found, err
}

// List lists prefix+sub and strips prefix from the keys.
func (p *prefixed) List(ctx context.Context, sub string) ([]KeyValue, int64, error) {
	kvs, rev, err := p.inner.List(ctx, p.prefix+sub)
	for i := range kvs {
		kvs[i].Key = p.strip(kvs[i].Key)
	}
	return kvs, rev, err
}

// Delete removes prefix+key.
func (p *prefixed) Delete(ctx context.Context, key string) (bool, error) {
	full, err := p.full(key)
	if err != nil {
		return false, err
	}
	return p.inner.Delete(ctx, full)
}

// Txn runs cmps and ops with prefix prepended to each key.
func (p *prefixed) Txn(ctx context.Context, cmps []Cmp, ops []Op) (bool, error) {
	if err := CheckTxn(cmps, ops); err != nil {
		return false, err
	}
	fullCmps := make([]Cmp, len(cmps))
	for i, c := range cmps {
		c.Key = p.prefix + c.Key
		fullCmps[i] = c
	}
	fullOps := make([]Op, len(ops))
	for i, op := range ops {
		op.Key = p.prefix + op.Key
		fullOps[i] = op
	}
	return p.inner.Txn(ctx, fullCmps, fullOps)
}

// Watch watches prefix+sub and strips prefix from event keys. A goroutine
// forwards the events; it ends when the inner channel closes or ctx ends.
func (p *prefixed) Watch(ctx context.Context, sub string, fromRev int64) (<-chan WatchEvent, error) {
	in, err := p.inner.Watch(ctx, p.prefix+sub, fromRev)
	if err != nil {
		return nil, err
	}
	out := make(chan WatchEvent)
	go func() {
		defer close(out)
		for ev := range in {
			ev.Key = p.strip(ev.Key)
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}
