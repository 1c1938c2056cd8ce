package bolt

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/contiv-ipam/agent/infra"
	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/kvdb"
)

// Plugin is the bolt store plugin: a kvdb.Store on one local database file.
type Plugin struct {
	Deps

	base  *Config // from UseConf; nil means DefaultConfig()
	cfg   Config  // the effective configuration, set by Init
	store *store  // set by Init

	flags *flag.FlagSet               // from RegisterFlags (-bolt-recover)
	env   func(string) (string, bool) // environment of the flags
	now   func() time.Time            // names the moved-aside file

	loaded config.Preloaded[Config] // by LoadConfig (loadconfig.go), for Init

	commitHook func(requests int) // UseCommitHook
}

// Deps are the plugin's dependencies.
type Deps struct {
	infra.PluginDeps
}

var (
	_ infra.Plugin   = (*Plugin)(nil)
	_ kvdb.Store     = (*Plugin)(nil)
	_ kvdb.Submitter = (*Plugin)(nil)
)

// Init loads bolt.conf, opens (or creates) the database and starts the
// committer. An existing file is checked first: a damaged one fails Init
// with an error wrapping ErrDamaged, or, with -bolt-recover, is moved
// aside and replaced by a fresh database.
func (p *Plugin) Init() error {
	cfg, err := p.initConfig()
	if err != nil {
		return err
	}
	rec, err := p.recovery()
	if err != nil {
		return err
	}
	hook := p.commitHook
	if hook == nil {
		if hook, err = p.faultHook(); err != nil {
			return err
		}
	}
	st, err := openStore(cfg, p.Log, rec)
	if err != nil {
		return err
	}
	st.beforeCommit = hook
	p.cfg, p.store = cfg, st
	p.Log.Info("database open", "path", cfg.DBPath, "revision", st.rev)
	return nil
}

// loadConfig decodes bolt.conf over the base configuration and validates it.
func (p *Plugin) loadConfig() (Config, error) {
	cfg := DefaultConfig()
	if p.base != nil {
		cfg = *p.base
	}
	if err := config.Load(p.Cfg, &cfg); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// Close fails pending writes with kvdb.ErrClosed, closes every watch and
// the file. It is safe after a failed Init and when called twice.
func (p *Plugin) Close() error {
	if p.store == nil {
		return nil
	}
	return p.store.close()
}

// Config returns the effective configuration (valid after Init).
func (p *Plugin) Config() Config { return p.cfg }

// Stats returns the committer's counters (zero before Init).
func (p *Plugin) Stats() Stats {
	if p.store == nil {
		return Stats{}
	}
	return p.store.stats.snapshot()
}

// NewBroker returns a view of the store under prefix.
func (p *Plugin) NewBroker(prefix string) kvdb.Broker { return kvdb.WithPrefix(p, prefix) }

// OnConnect runs fn at once: a local file is always connected. An error
// from fn is logged.
func (p *Plugin) OnConnect(fn func() error) {
	if err := fn(); err != nil {
		p.Log.Error("OnConnect callback failed", "err", err)
	}
}

// OnReconnect does nothing: a local file never disconnects, so fn is never
// called.
func (p *Plugin) OnReconnect(func()) {}

// opened returns the store, or ErrClosed before Init.
func (p *Plugin) opened() (*store, error) {
	if p.store == nil {
		return nil, fmt.Errorf("bolt: plugin not initialised: %w", kvdb.ErrClosed)
	}
	return p.store, nil
}

// Put implements kvdb.Broker.
func (p *Plugin) Put(ctx context.Context, key string, value []byte) error {
	if err := kvdb.CheckPut(key, value); err != nil {
		return err
	}
	s, err := p.opened()
	if err != nil {
		return err
	}
	res := s.write(ctx, nil, []kvdb.Op{kvdb.PutOp(key, value)})
	return wrapWrite("put", key, res.err)
}

// Get implements kvdb.Broker.
func (p *Plugin) Get(ctx context.Context, key string) (kvdb.KeyValue, bool, error) {
	s, err := p.opened()
	if err != nil {
		return kvdb.KeyValue{}, false, err
	}
	return s.get(ctx, key)
}

// List implements kvdb.Broker.
func (p *Plugin) List(ctx context.Context, prefix string) ([]kvdb.KeyValue, int64, error) {
	s, err := p.opened()
	if err != nil {
		return nil, 0, err
	}
	return s.list(ctx, prefix)
}

// Delete implements kvdb.Broker.
func (p *Plugin) Delete(ctx context.Context, key string) (bool, error) {
	if err := kvdb.CheckKey(key); err != nil {
		return false, err
	}
	s, err := p.opened()
	if err != nil {
		return false, err
	}
	res := s.write(ctx, nil, []kvdb.Op{kvdb.DeleteOp(key)})
	return res.deleted > 0, wrapWrite("delete", key, res.err)
}

// Txn implements kvdb.Broker.
func (p *Plugin) Txn(ctx context.Context, cmps []kvdb.Cmp, ops []kvdb.Op) (bool, error) {
	if err := kvdb.CheckTxn(cmps, ops); err != nil {
		return false, err
	}
	s, err := p.opened()
	if err != nil {
		return false, err
	}
	res := s.write(ctx, cmps, ops)
	return res.succeeded, wrapWrite("txn", txnKey(cmps, ops), res.err)
}

// Submit implements kvdb.Submitter: the write joins the committer's queue
// in the caller's order and done hears its outcome.
func (p *Plugin) Submit(ctx context.Context, cmps []kvdb.Cmp, ops []kvdb.Op, done func(succeeded bool, err error)) error {
	if err := kvdb.CheckTxn(cmps, ops); err != nil {
		return err
	}
	s, err := p.opened()
	if err != nil {
		return err
	}
	key := txnKey(cmps, ops)
	err = s.submit(ctx, cmps, ops, func(ok bool, err error) { done(ok, wrapWrite("txn", key, err)) })
	return wrapWrite("submit", key, err)
}

// Watch implements kvdb.Broker. A fromRev older than the in-memory history
// (see watch-history; the history starts empty when the file is opened)
// fails with an error wrapping kvdb.ErrCompacted.
func (p *Plugin) Watch(ctx context.Context, prefix string, fromRev int64) (<-chan kvdb.WatchEvent, error) {
	s, err := p.opened()
	if err != nil {
		return nil, err
	}
	return s.hub.watch(ctx, prefix, fromRev)
}

func wrapWrite(op, key string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("bolt %s %q: %w", op, key, err)
}

// txnKey names a transaction in errors by its first key.
func txnKey(cmps []kvdb.Cmp, ops []kvdb.Op) string {
	switch {
	case len(ops) > 0:
		return ops[0].Key
	case len(cmps) > 0:
		return cmps[0].Key
	}
	return ""
}
