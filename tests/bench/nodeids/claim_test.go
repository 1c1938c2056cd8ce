package nodeids

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
	"github.com/contiv-ipam/agent/plugins/nodesync"
)

// maxRounds bounds the claims of one client: its first resync plus the
// retries (a ClaimRetry after etcd did not answer, a new resync after a
// claim that gave up, as a restarted agent would run).
const maxRounds = 20

// label is a servicelabel.ReaderAPI naming one node.
type label string

func (l label) GetAgentLabel() string                   { return string(l) }
func (l label) GetAgentPrefix() string                  { return "/vnf-agent/" + string(l) + "/" }
func (l label) GetDifferentAgentPrefix(o string) string { return "/vnf-agent/" + o + "/" }
func (l label) GetAllAgentsPrefix() string              { return "/vnf-agent/" }

// retryLoop is a client's event loop: it hands the ClaimRetry events
// nodesync pushes (after a claim etcd did not answer) to the client's
// goroutine, which runs them as the controller would.
type retryLoop chan api.Event

func (l retryLoop) PushEvent(ev api.Event) error {
	if _, ok := ev.(*nodesync.ClaimRetry); ok {
		select {
		case l <- ev:
		default: // one pending retry is enough
		}
	}
	return nil
}

// claimLog counts what the claims logged: nodesync's "node ID claimed"
// line carries the transactions (attempts), the lost ones (conflicts), the
// listings of one claim and the keys they returned.
type claimLog struct {
	claims, attempts, conflicts, listings atomic.Int64
	keysListed                            atomic.Int64 // keys the listings returned
	worst                                 atomic.Int64 // most attempts of one claim
}

// Enabled is true for Info and above.
func (c *claimLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

// Handle adds up the counts of "node ID claimed" lines.
func (c *claimLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "node ID claimed" {
		return nil
	}
	c.claims.Add(1)
	r.Attrs(func(a slog.Attr) bool {
		if a.Value.Kind() != slog.KindInt64 {
			return true
		}
		n := a.Value.Int64()
		switch a.Key {
		case "attempts":
			c.attempts.Add(n)
			for w := c.worst.Load(); n > w && !c.worst.CompareAndSwap(w, n); w = c.worst.Load() {
			}
		case "conflicts":
			c.conflicts.Add(n)
		case "listings":
			c.listings.Add(n)
		case "keys-listed":
			c.keysListed.Add(n)
		}
		return true
	})
	return nil
}

func (c *claimLog) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *claimLog) WithGroup(string) slog.Handler      { return c }

// client is one node's nodesync plugin on an etcd client connection.
type client struct {
	name string
	db   *etcd.Plugin // shared by perConn clients (see newClients)
	sync *nodesync.Plugin
	loop retryLoop
}

// newClients builds n nodesync plugins for nodes node-00001..node-n on
// etcd plugins (client connections) to srv with the defaults of
// etcd.conf: perConn consecutive clients share one etcd plugin, as its
// Broker and PresenceStore allow (every client still sends its own
// requests: its own lease, presence, listings and transactions; only the
// gRPC connection is shared). It returns the clients and the etcd plugins.
func newClients(tb testing.TB, srv *etcdtest.Server, n, perConn int, log *claimLog) ([]*client, []*etcd.Plugin) {
	tb.Helper()
	cs := make([]*client, n)
	var dbs []*etcd.Plugin
	quiet := slog.New(slog.DiscardHandler)
	for i := range cs {
		c := &client{name: fmt.Sprintf("node-%05d", i+1), loop: make(retryLoop, 1)}
		if i%max(perConn, 1) == 0 {
			cfg := etcd.DefaultConfig()
			cfg.Endpoints = []string{srv.Endpoint()}
			db := etcd.NewPlugin(etcd.UseConf(cfg), etcd.UseEnv(noEnv), etcd.UseDeps(func(d *etcd.Deps) {
				d.Cfg, d.Log = config.NoFile, quiet
			}))
			if err := db.Init(); err != nil {
				tb.Fatalf("etcd plugin of %s: %v", c.name, err)
			}
			dbs = append(dbs, db)
		}
		c.db = dbs[len(dbs)-1]
		c.sync = nodesync.NewPlugin(nodesync.UseEnv(noEnv), nodesync.UseDeps(func(d *nodesync.Deps) {
			d.Cfg, d.Log = config.NoFile, slog.New(log)
			d.ServiceLabel, d.DB, d.Presence, d.EventLoop = label(c.name), c.db, c.db, c.loop
		}))
		if err := c.sync.Init(); err != nil {
			tb.Fatalf("nodesync of %s: %v", c.name, err)
		}
		cs[i] = c
	}
	return cs, dbs
}

func noEnv(string) (string, bool) { return "", false }

// closeClients closes the plugins (revoking the presences), then the
// etcd plugins.
func closeClients(cs []*client, dbs []*etcd.Plugin) {
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(func() { _ = c.sync.Close() })
	}
	wg.Wait()
	for _, db := range dbs {
		wg.Go(func() { _ = db.Close() })
	}
	wg.Wait()
}

// outcome is what a round of claims did.
type outcome struct {
	took     time.Duration
	ids      map[string]uint32 // by node name
	retries  int64             // ClaimRetry events run (etcd did not answer)
	gaveUp   int64             // claims that gave up (ErrClaimGaveUp) and were run again
	failures []error
}

// claimAll runs the first DB resync of every client, each on its own
// goroutine, all released together but at most concurrency claiming at
// a time (a client holds its slot until it has an ID), and waits until
// each has an ID: a ClaimRetry pushed after a claim etcd did not answer
// is run when it comes, a claim that gave up is run again at once.
func claimAll(cs []*client, concurrency int) outcome {
	slots := make(chan struct{}, concurrency)
	var out outcome
	var retries, gaveUp atomic.Int64
	errs := make([]error, len(cs))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() {
			<-start
			slots <- struct{}{}
			defer func() { <-slots }()
			errs[i] = c.claim(&retries, &gaveUp)
		})
	}
	began := time.Now()
	close(start)
	wg.Wait()
	out.took = time.Since(began)
	out.retries, out.gaveUp = retries.Load(), gaveUp.Load()
	out.ids = make(map[string]uint32, len(cs))
	for i, c := range cs {
		if errs[i] != nil {
			out.failures = append(out.failures, errs[i])
			continue
		}
		out.ids[c.name] = c.sync.GetNodeID()
	}
	return out
}

// maxID is the highest ID claimed.
func (o outcome) maxID() uint32 {
	var m uint32
	for _, id := range o.ids {
		m = max(m, id)
	}
	return m
}

// claim runs the client's resyncs until it has an ID.
func (c *client) claim(retries, gaveUp *atomic.Int64) error {
	var ev api.Event = &api.DBResync{KubeState: api.KubeStateData{}}
	for round := 0; round < maxRounds; round++ {
		err := c.sync.Resync(ev, api.KubeStateData{}, round+1, nil)
		switch {
		case err == nil && c.sync.GetNodeID() != 0:
			return nil
		case err == nil: // etcd did not answer: nodesync pushes a ClaimRetry
			retries.Add(1)
			select {
			case ev = <-c.loop:
			case <-time.After(time.Minute):
				return fmt.Errorf("%s: no ID and no ClaimRetry within a minute", c.name)
			}
		case errors.Is(err, nodesync.ErrClaimGaveUp):
			gaveUp.Add(1)
			ev = &api.DBResync{KubeState: api.KubeStateData{}}
		default:
			return fmt.Errorf("%s: %w", c.name, err)
		}
	}
	return fmt.Errorf("%s: no ID after %d resyncs", c.name, maxRounds)
}

// check fails when a claim failed, two nodes hold one ID, or the records
// in etcd disagree with the IDs the plugins report.
func check(ctx context.Context, srv *etcdtest.Server, tb testing.TB, out outcome, n int) error {
	if len(out.failures) > 0 {
		return fmt.Errorf("%d of %d clients have no ID; first: %w", len(out.failures), n, out.failures[0])
	}
	byID := make(map[uint32]string, n)
	for name, id := range out.ids {
		if id == 0 {
			return fmt.Errorf("%s has ID 0", name)
		}
		if other, dup := byID[id]; dup {
			return fmt.Errorf("duplicate node ID %d: %s and %s", id, other, name)
		}
		byID[id] = name
	}
	resp, err := srv.Client(tb).Get(ctx, codec.KSRPrefix+vppnode.KeyPrefix, clientv3.WithPrefix())
	if err != nil {
		return err
	}
	if len(resp.Kvs) != n {
		return fmt.Errorf("%d node ID records in etcd, want %d", len(resp.Kvs), n)
	}
	for _, kv := range resp.Kvs {
		id, err := vppnode.ParseKey(string(kv.Key[len(codec.KSRPrefix):]))
		if err != nil {
			return err
		}
		rec := new(vppnode.VppNode)
		if err := codec.Unmarshal(kv.Value, rec); err != nil {
			return err
		}
		if byID[id] != rec.GetName() {
			return fmt.Errorf("record of ID %d names %q, the plugin of %q holds it", id, rec.GetName(), byID[id])
		}
	}
	return nil
}
