package etcd

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/contiv-ipam/agent/infra/kvdb"
)

// client returns the etcd client, or an error wrapping kvdb.ErrClosed
// before Init and after Close.
func (p *Plugin) client(op, key string) (*clientv3.Client, error) {
	if p.cli == nil || p.closed.Load() {
		return nil, fmt.Errorf("etcd %s %q: %w", op, key, kvdb.ErrClosed)
	}
	return p.cli, nil
}

// opCtx bounds one request by operation-timeout.
func (p *Plugin) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, p.cfg.OperationTimeout)
}

// wrap adds the operation and key to err, mapping a closed client to
// kvdb.ErrClosed.
func (p *Plugin) wrap(op, key string, err error) error {
	if err == nil {
		return nil
	}
	if p.closed.Load() {
		return fmt.Errorf("etcd %s %q: %w (%w)", op, key, kvdb.ErrClosed, err)
	}
	return fmt.Errorf("etcd %s %q: %w", op, key, err)
}

// Put implements kvdb.Broker.
func (p *Plugin) Put(ctx context.Context, key string, value []byte) error {
	if err := kvdb.CheckPut(key, value); err != nil {
		return err
	}
	cli, err := p.client("put", key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return p.wrap("put", key, notSent(err))
	}
	ctx, cancel := p.opCtx(ctx)
	defer cancel()
	m := p.ident.mark()
	resp, err := cli.Put(ctx, key, string(value))
	if err != nil {
		return p.writeErr("put", key, err)
	}
	p.answered(m, resp.Header, true)
	return nil
}

// Get implements kvdb.Broker.
func (p *Plugin) Get(ctx context.Context, key string) (kvdb.KeyValue, bool, error) {
	if err := kvdb.CheckKey(key); err != nil {
		return kvdb.KeyValue{}, false, err
	}
	cli, err := p.client("get", key)
	if err != nil {
		return kvdb.KeyValue{}, false, err
	}
	ctx, cancel := p.opCtx(ctx)
	defer cancel()
	m := p.ident.mark()
	resp, err := cli.Get(ctx, key)
	if err != nil {
		return kvdb.KeyValue{}, false, p.wrap("get", key, err)
	}
	p.answered(m, resp.Header, true)
	if len(resp.Kvs) == 0 {
		return kvdb.KeyValue{}, false, nil
	}
	return keyValue(resp.Kvs[0]), true, nil
}

// List implements kvdb.Broker; rev is the revision of the first page's
// response. A prefix of more than listPageSize keys is read in pages, each
// bounded by operation-timeout and read at that revision, so the result is
// one snapshot; a compaction past it between two pages fails the List
// (wrapping etcd's "required revision has been compacted"): list again.
func (p *Plugin) List(ctx context.Context, prefix string) ([]kvdb.KeyValue, int64, error) {
	cli, err := p.client("list", prefix)
	if err != nil {
		return nil, 0, err
	}
	var kvs []kvdb.KeyValue
	var rev int64
	from, end := prefix, clientv3.GetPrefixRangeEnd(prefix)
	if from == "" {
		from = "\x00" // every key: etcd refuses an empty one (end "\x00" is "to the last")
	}
	for {
		resp, err := p.listPage(ctx, cli, from, end, rev)
		if err != nil {
			return nil, 0, p.wrap("list", prefix, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			kvs = append(kvs, keyValue(kv))
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return kvs, rev, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
		if listPageHook != nil {
			listPageHook()
		}
	}
}

// listPageSize is the most keys one request of List reads: a big prefix is
// listed in pages, each read at the first page's revision (one snapshot),
// so that neither etcd nor the agent holds one response of every key.
var listPageSize int64 = 2000

// listPageHook, when set (tests), runs between two pages of a List.
var listPageHook func()

// listPage reads one page of [from, end) at revision rev (0: the latest),
// in key order, bounded by operation-timeout.
func (p *Plugin) listPage(ctx context.Context, cli *clientv3.Client, from, end string, rev int64) (*clientv3.GetResponse, error) {
	ctx, cancel := p.opCtx(ctx)
	defer cancel()
	opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(listPageSize),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend)}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	m := p.ident.mark()
	resp, err := cli.Get(ctx, from, opts...)
	if err != nil {
		return nil, err
	}
	p.answered(m, resp.Header, true)
	return resp, nil
}

// Delete implements kvdb.Broker.
func (p *Plugin) Delete(ctx context.Context, key string) (bool, error) {
	if err := kvdb.CheckKey(key); err != nil {
		return false, err
	}
	cli, err := p.client("delete", key)
	if err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, p.wrap("delete", key, notSent(err))
	}
	ctx, cancel := p.opCtx(ctx)
	defer cancel()
	m := p.ident.mark()
	resp, err := cli.Delete(ctx, key)
	if err != nil {
		return false, p.writeErr("delete", key, err)
	}
	p.answered(m, resp.Header, true)
	return resp.Deleted > 0, nil
}

// Txn implements kvdb.Broker with one etcd transaction.
func (p *Plugin) Txn(ctx context.Context, cmps []kvdb.Cmp, ops []kvdb.Op) (bool, error) {
	if err := kvdb.CheckTxn(cmps, ops); err != nil {
		return false, err
	}
	name := txnName(cmps, ops)
	cli, err := p.client("txn", name)
	if err != nil {
		return false, err
	}
	ifs := make([]clientv3.Cmp, len(cmps))
	for i, c := range cmps {
		ifs[i] = etcdCmp(c)
	}
	thens := make([]clientv3.Op, len(ops))
	for i, op := range ops {
		if op.Kind == kvdb.OpPut {
			thens[i] = clientv3.OpPut(op.Key, string(op.Value))
		} else {
			thens[i] = clientv3.OpDelete(op.Key)
		}
	}
	if err := ctx.Err(); err != nil {
		return false, p.wrap("txn", name, notSent(err))
	}
	ctx, cancel := p.opCtx(ctx)
	defer cancel()
	m := p.ident.mark()
	resp, err := cli.Txn(ctx).If(ifs...).Then(thens...).Commit()
	if err != nil {
		return false, p.writeErr("txn", name, err)
	}
	p.answered(m, resp.Header, true)
	return resp.Succeeded, nil
}

// notSent is the error of a write whose ctx ended before it was sent: not
// applied.
func notSent(err error) error {
	return fmt.Errorf("not applied: the context ended before the request was sent: %w", err)
}

// writeErr wraps the error of a write request sent to etcd, by its
// outcome (see kvdb's "Write outcomes"): what etcd rejects before it
// proposes anything is not applied; anything else (a timeout, a lost
// connection or leader, a closed client) leaves the outcome unknown: the
// request may have been proposed, and may still be applied.
func (p *Plugin) writeErr(op, key string, err error) error {
	if err == nil {
		return nil
	}
	if rejected(err) {
		return p.wrap(op, key, err)
	}
	return p.wrap(op, key, fmt.Errorf("%w: %w", kvdb.ErrUnknownOutcome, err))
}

// rejected tells whether err is one etcd raises before it proposes a
// request: a bad or too large request, a compacted revision, missing
// rights, too many requests.
func rejected(err error) bool {
	code := codes.Unknown
	var coded interface{ Code() codes.Code } // rpctypes.EtcdError
	if errors.As(err, &coded) {
		code = coded.Code()
	} else if st, ok := status.FromError(err); ok {
		code = st.Code()
	}
	switch code {
	case codes.InvalidArgument, codes.FailedPrecondition, codes.OutOfRange, codes.PermissionDenied,
		codes.Unauthenticated, codes.ResourceExhausted, codes.AlreadyExists, codes.NotFound, codes.Unimplemented:
		return true
	}
	return false
}

func etcdCmp(c kvdb.Cmp) clientv3.Cmp {
	switch c.Kind {
	case kvdb.CmpValue:
		return clientv3.Compare(clientv3.Value(c.Key), "=", string(c.Value))
	case kvdb.CmpAbsent:
		return clientv3.Compare(clientv3.CreateRevision(c.Key), "=", 0)
	}
	return clientv3.Compare(clientv3.ModRevision(c.Key), "=", c.Revision)
}

// txnName names a transaction in errors by its first key.
func txnName(cmps []kvdb.Cmp, ops []kvdb.Op) string {
	switch {
	case len(ops) > 0:
		return ops[0].Key
	case len(cmps) > 0:
		return cmps[0].Key
	}
	return ""
}

// keyValue converts an etcd key-value; Value is never nil.
func keyValue(kv *mvccpb.KeyValue) kvdb.KeyValue {
	return kvdb.KeyValue{Key: string(kv.Key), Value: nonNil(kv.Value), Revision: kv.ModRevision}
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// NewSession starts a lease-backed session with the session-ttl, for keys
// that must vanish with this agent and for elections
// (go.etcd.io/etcd/client/v3/concurrency). Close it when done.
func (p *Plugin) NewSession(ctx context.Context) (*concurrency.Session, error) {
	cli, err := p.client("session", "")
	if err != nil {
		return nil, err
	}
	ttl := int(math.Ceil(p.cfg.SessionTTL.Seconds()))
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(ttl), concurrency.WithContext(ctx))
	if err != nil {
		return nil, p.wrap("session", fmt.Sprintf("ttl %ds", ttl), err)
	}
	return s, nil
}

// Watch implements kvdb.Broker. It returns once etcd has confirmed the
// watch (within operation-timeout). A compacted fromRev closes the
// channel, and so does the replacement of the store (identity.go): a
// watch is registered with the identity before it is sent.
func (p *Plugin) Watch(ctx context.Context, prefix string, fromRev int64) (<-chan kvdb.WatchEvent, error) {
	cli, err := p.client("watch", prefix)
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancelCause(ctx)
	entry, m := p.ident.addWatch(cancel)
	end := func() {
		cancel(nil)
		p.ident.removeWatch(entry)
	}
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithPrevKV(), clientv3.WithCreatedNotify()}
	if fromRev > 0 {
		opts = append(opts, clientv3.WithRev(fromRev))
	}
	wch := cli.Watch(wctx, prefix, opts...)
	if err := p.awaitCreated(wctx, m, wch); err != nil {
		end()
		return nil, p.wrap("watch", prefix, err)
	}
	out := make(chan kvdb.WatchEvent)
	started := p.goTracked(func(life context.Context) {
		defer end()
		defer close(out)
		p.forward(wctx, life, m, prefix, wch, out)
	})
	if !started {
		end()
		return nil, fmt.Errorf("etcd watch %q: %w", prefix, kvdb.ErrClosed)
	}
	return out, nil
}

// awaitCreated waits for etcd's confirmation that the watch exists.
func (p *Plugin) awaitCreated(ctx context.Context, m mark, wch clientv3.WatchChan) error {
	t := time.NewTimer(p.cfg.OperationTimeout)
	defer t.Stop()
	select {
	case resp, ok := <-wch:
		if ok {
			p.answered(m, &resp.Header, false)
		}
		switch {
		case ctx.Err() != nil:
			return context.Cause(ctx)
		case !ok:
			return kvdb.ErrClosed
		case resp.CompactRevision != 0:
			return fmt.Errorf("%w: etcd compacted up to revision %d", kvdb.ErrCompacted, resp.CompactRevision)
		case resp.Err() != nil:
			return resp.Err()
		case !resp.Created:
			return errors.New("etcd did not confirm the watch")
		}
		return nil
	case <-t.C:
		return fmt.Errorf("watch not established within operation-timeout %s", p.cfg.OperationTimeout)
	}
}

// forward converts etcd's responses into events until the watch ends: ctx
// done (by its consumer, or because the store was replaced), plugin
// closed, or the watch broken (compaction). The events of a response from
// another store than the watch's are never delivered.
func (p *Plugin) forward(ctx, life context.Context, m mark, prefix string, wch clientv3.WatchChan, out chan<- kvdb.WatchEvent) {
	for resp := range wch {
		p.answered(m, &resp.Header, false)
		if err := resp.Err(); err != nil || ctx.Err() != nil {
			if ctx.Err() == nil && life.Err() == nil {
				p.Log.Warn("watch broke; the consumer must list again", "prefix", prefix, "err", err)
			}
			return
		}
		for _, ev := range resp.Events {
			select {
			case out <- event(ev):
			case <-ctx.Done():
				return
			case <-life.Done():
				return
			}
		}
	}
}

// event converts one etcd event.
func event(ev *clientv3.Event) kvdb.WatchEvent {
	out := kvdb.WatchEvent{Key: string(ev.Kv.Key), Revision: ev.Kv.ModRevision}
	if ev.Type == clientv3.EventTypeDelete {
		out.Type = kvdb.EventDelete
	} else {
		out.Type, out.Value = kvdb.EventPut, nonNil(ev.Kv.Value)
	}
	if ev.PrevKv != nil {
		out.PrevValue = nonNil(ev.PrevKv.Value)
	}
	return out
}
