package ksr

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/infra/rest"
	"github.com/contiv-ipam/agent/plugins/ksr/model/agentstatus"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	mirrormodel "github.com/contiv-ipam/agent/plugins/ksr/model/mirror"
	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
)

// memDB is the part of etcd the cluster page reads, in memory: Get of
// the mirror marker, List of the node-ID records. Any other call panics
// (the embedded Broker is nil).
type memDB struct {
	kvdb.Broker
	kvs map[string]kvdb.KeyValue
}

func (m *memDB) Get(_ context.Context, key string) (kvdb.KeyValue, bool, error) {
	kv, ok := m.kvs[key]
	return kv, ok, nil
}

// List returns a fresh slice sorted by key, as etcd does.
func (m *memDB) List(_ context.Context, prefix string) ([]kvdb.KeyValue, int64, error) {
	var out []kvdb.KeyValue
	for k, kv := range m.kvs {
		if strings.HasPrefix(k, prefix) {
			out = append(out, kv)
		}
	}
	slices.SortFunc(out, func(a, b kvdb.KeyValue) int { return strings.Compare(a.Key, b.Key) })
	return out, int64(len(m.kvs)), nil
}

// memElection says that "ksr-a" leads.
type memElection struct{ kvdb.ElectionStore }

func (memElection) Leader(context.Context, string) ([]byte, bool, error) {
	return []byte("ksr-a"), true, nil
}

// clusterOf is a contiv-ksr replica (never started) whose etcd holds n
// node-ID records and a fresh mirror marker, and whose status watch holds
// the agents' records, decoded as the watch decodes them: most nodes
// fresh, every 10th stale, every 25th without a record, every 50th
// with an invalid one, and a node with a record but no ID.
func clusterOf(b *testing.B, n int) *Plugin {
	b.Helper()
	db := &memDB{kvs: map[string]kvdb.KeyValue{}}
	put := func(key string, value []byte) {
		db.kvs[key] = kvdb.KeyValue{Key: key, Value: value, Revision: int64(len(db.kvs) + 1)}
	}
	put(markerKey, mirrormodel.Marker{Leader: "ksr-a", ResourceVersion: "123456", Pods: 30 * n,
		Heartbeat: pageNow.Add(-4 * time.Second), Interval: "10s"}.Encode())
	w := newStatusWatch(db, slog.New(slog.DiscardHandler))
	record := func(st *agentstatus.Status) {
		v, err := st.Encode()
		if err != nil {
			b.Fatal(err)
		}
		name, ws, ok := parseWatched(agentstatus.Key(st.Node), v, int64(len(db.kvs)))
		if !ok {
			b.Fatalf("record of %s not parsed", st.Node)
		}
		w.nodes[name] = ws
	}
	for i := 1; i <= n; i++ {
		id, name := uint32(i), fmt.Sprintf("worker-%05d", i)
		v, err := codec.Marshal(&vppnode.VppNode{Id: id, Name: name,
			IpAddresses: []string{fmt.Sprintf("192.168.%d.%d/16", i/250, 1+i%250), fmt.Sprintf("fd40::%x/64", i)}})
		if err != nil {
			b.Fatal(err)
		}
		put(codec.KSRPrefix+vppnode.Key(id), v)
		switch {
		case i%50 == 0:
			name, ws, _ := parseWatched(agentstatus.Key(name), []byte(`{"version":2}`), 1)
			w.nodes[name] = ws
		case i%25 == 0:
		default:
			age := time.Duration(i%30) * time.Second
			if i%10 == 0 {
				age = time.Hour
			}
			st := agentRecord(name, id, uint64(i%254), 254, age)
			st.Pools = append(st.Pools, agentstatus.Pool{Name: "fd10::/64", Family: 6, Prefix: "fd10::/64", Used: uint64(i % 254), Total: 1 << 62})
			st.ReleaseCandidates = i % 3
			record(st)
		}
	}
	record(agentRecord("orphan", uint32(n+1), 3, 254, time.Second))
	w.rev, w.synced = int64(len(db.kvs)), true

	p := NewPlugin(UseClock(testingclock.NewFakeClock(pageNow)), UseIdentity("ksr-a"), UseDeps(func(d *Deps) {
		d.Log, d.DB, d.Election = slog.New(slog.DiscardHandler), db, memElection{}
	}))
	p.cfg = testConfig()
	p.statuses = w
	p.status.setLeading(true)
	return p
}

// BenchmarkClusterPage serves contiv-ksr's cluster page (HTML, with the
// index's endpoint list as GET / has it) and its JSON,
// GET NodesStatusPath, from in-memory records: the node-ID records'
// decoding, the join with the watched status records, the sort and the
// rendering, without etcd's round trips.
func BenchmarkClusterPage(b *testing.B) {
	endpoints := []rest.Endpoint{
		{Method: http.MethodGet, Path: ClusterPath, Description: "contiv-ksr: the cluster page"},
		{Method: http.MethodGet, Path: NodesStatusPath, Description: "contiv-ksr: the cluster page's data"},
		{Method: http.MethodGet, Path: StatusPath},
		{Method: http.MethodPost, Path: ResyncPath},
	}
	for _, n := range []int{100, 1000, 5000} {
		p := clusterOf(b, n)
		f := rest.NewFormatter(p.Log)
		routes := []struct {
			name    string
			handler http.HandlerFunc
		}{
			{"html", func(w http.ResponseWriter, r *http.Request) { p.writeClusterPage(w, r, endpoints) }},
			{"json", p.nodesStatusHandler(f)},
		}
		for _, route := range routes {
			b.Run(fmt.Sprintf("%s/nodes=%d", route.name, n), func(b *testing.B) {
				req := httptest.NewRequest(http.MethodGet, "/", nil)
				req.Header.Set("Accept", "text/html,application/xhtml+xml")
				check := httptest.NewRecorder()
				route.handler(check, req)
				if got := strings.Count(check.Body.String(), `"node-cell `) + strings.Count(check.Body.String(), `"state": "`); got != n+1 {
					b.Fatalf("%d nodes rendered, want %d", got, n+1)
				}
				var size int
				b.ReportAllocs()
				for b.Loop() {
					// A sink that keeps nothing, as a connection: B/op is
					// the handler's (a recorder's growing buffer would add
					// up to twice the page).
					w := &discardWriter{header: http.Header{}}
					route.handler(w, req)
					if w.code != http.StatusOK {
						b.Fatalf("status %d", w.code)
					}
					size = w.n
				}
				b.ReportMetric(float64(size), "bytes/page")
			})
		}
	}
}

// discardWriter is a ResponseWriter that counts the body and keeps none.
type discardWriter struct {
	header http.Header
	code   int
	n      int
}

func (d *discardWriter) Header() http.Header { return d.header }

func (d *discardWriter) WriteHeader(code int) {
	if d.code == 0 {
		d.code = code
	}
}

func (d *discardWriter) Write(b []byte) (int, error) {
	d.WriteHeader(http.StatusOK)
	d.n += len(b)
	return len(b), nil
}
