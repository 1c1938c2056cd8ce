package resync

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/controller/dbresources"
	"github.com/contiv-ipam/agent/plugins/controller/dbwatcher"
)

// resyncCatcher is the event loop of the DB watcher: it hands each pushed
// DB resync to the benchmark.
type resyncCatcher chan *api.DBResync

func (c resyncCatcher) PushEventWait(ctx context.Context, ev api.Event) error {
	if db, ok := ev.(*api.DBResync); ok {
		select {
		case c <- db:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// newEtcdStore is the etcd plugin (client only) on srv, as the agent
// configures it with external endpoints; closed at cleanup.
func newEtcdStore(tb testing.TB, srv *etcdtest.Server) *etcd.Plugin {
	tb.Helper()
	cfg := etcd.DefaultConfig()
	cfg.Endpoints = []string{srv.Endpoint()}
	db := etcd.NewPlugin(etcd.UseConf(cfg), etcd.UseEnv(func(string) (string, bool) { return "", false }),
		etcd.UseDeps(func(d *etcd.Deps) { d.Cfg, d.Log = config.NoFile, slog.New(slog.DiscardHandler) }))
	if err := db.Init(); err != nil {
		tb.Fatalf("etcd plugin Init: %v", err)
	}
	tb.Cleanup(func() { _ = db.Close() })
	return db
}

// watcherResync starts a DB watcher on remote with f's bolt as its
// mirror, waits for its remote DB resync and stops it; it returns the
// number of values of the pushed state.
func watcherResync(tb testing.TB, f *inProc, remote *etcd.Plugin, s shape) int {
	tb.Helper()
	caught := make(resyncCatcher, 1)
	prefixes, err := dbresources.WatchPrefixes(thisNode, s.layout)
	if err != nil {
		tb.Fatal(err)
	}
	w, err := dbwatcher.New(dbwatcher.Config{Remote: remote, Local: f.bolt, Loop: caught, Prefixes: prefixes})
	if err != nil {
		tb.Fatal(err)
	}
	w.Start()
	defer w.Stop()
	select {
	case db := <-caught:
		return db.KubeState.Len()
	case <-time.After(time.Minute):
		tb.Fatal("no DB resync within a minute")
		return 0
	}
}
