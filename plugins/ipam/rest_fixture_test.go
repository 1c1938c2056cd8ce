package ipam_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/infra/logging/logtest"
	"github.com/contiv-ipam/agent/infra/rest"
	"github.com/contiv-ipam/agent/infra/rest/resttest"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ipam"
)

// restOpts tune newRESTFixture.
type restOpts struct {
	yaml   string            // "" = defaultTestConfig
	nodeID uint32            // 0 = 1
	rest   []rest.Option     // the REST server's options (resttest.New)
	clock  *fakeClock        // nil = the real clock
	noSync bool              // no first resync
	db     kvdb.Broker       // nil: memory only
	ks     api.KubeStateData // the first resync's Kubernetes state (nil: empty)
	// runtime makes the container runtime a witness (no GC).
	runtime bool
}

// restFixture is IPAM served by a real REST plugin on 127.0.0.1:0.
type restFixture struct {
	beater
	t    *testing.T
	ipam *ipam.Plugin
	srv  *resttest.Server
	sync *fakeNodeSync
	log  *logBuffer // IPAM's log, Info and above
}

// newRESTFixture starts the REST server and IPAM on it, and runs IPAM's
// first resync (unless noSync).
func newRESTFixture(t *testing.T, o restOpts) *restFixture {
	t.Helper()
	if o.yaml == "" {
		o.yaml = defaultTestConfig
	}
	if o.nodeID == 0 {
		o.nodeID = 1
	}
	srv := resttest.New(t, o.rest...)
	conf, err := newContivConf(t, o.yaml)
	if err != nil {
		t.Fatal(err)
	}
	ns := &fakeNodeSync{}
	ns.id.Store(o.nodeID)
	f := &restFixture{t: t, srv: srv, sync: ns, log: &logBuffer{}}
	log := slog.New(slog.NewJSONHandler(f.log, &slog.HandlerOptions{Level: slog.LevelInfo}))
	opts := []ipam.Option{ipam.UseDeps(func(d *ipam.Deps) {
		d.Log, d.ContivConf, d.NodeSync, d.ServiceLabel, d.HTTP = log, conf, ns, fakeLabel{thisNode}, srv.Plugin
		d.LocalDB = o.db
	})}
	if o.clock != nil {
		opts = append(opts, ipam.UseClock(o.clock))
	}
	f.ipam = ipam.NewPlugin(opts...)
	f.beater = beater{p: f.ipam, clock: o.clock}
	if err := f.ipam.Init(); err != nil {
		t.Fatal(err)
	}
	if o.runtime {
		if err := f.ipam.UseRuntime(0); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.ipam.AfterInit(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.ipam.Close() })
	if !o.noSync {
		ks := o.ks
		if ks == nil {
			ks = api.KubeStateData{}
		}
		if err := f.ipam.Resync(&api.DBResync{KubeState: ks}, ks, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// basicAuthConf is a REST server with client-basic-auth "admin:s3cret".
func basicAuthConf() rest.Option {
	c := resttest.Config()
	c.ClientBasicAuth = []string{"admin:s3cret"}
	return rest.UseConf(c)
}

// admin is the header of the basic-auth user of basicAuthConf.
func admin() http.Header { return resttest.BasicAuth("admin", "s3cret") }

// jsonHeader adds Content-Type: application/json to h.
func jsonHeader(h http.Header) http.Header {
	if h == nil {
		h = http.Header{}
	}
	h.Set("Content-Type", "application/json")
	return h
}

// post sends POST path with body as JSON and the header h (admin() and
// the like), and returns the status and the body.
func (f *restFixture) post(path, body string, h http.Header) (int, string) {
	f.t.Helper()
	return f.srv.Do(http.MethodPost, path, body, jsonHeader(h))
}

// logBuffer collects log lines; safe for concurrent writers.
type logBuffer struct{ logtest.Buffer }

// records are the log records with message msg, decoded.
func (b *logBuffer) records(msg string) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(b.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}
