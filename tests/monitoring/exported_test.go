package monitoring

import (
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/contiv-ipam/agent/infra"
	"github.com/contiv-ipam/agent/infra/health"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd"
	"github.com/contiv-ipam/agent/infra/metrics"
	"github.com/contiv-ipam/agent/infra/servicelabel"
	"github.com/contiv-ipam/agent/plugins/contivconf"
	"github.com/contiv-ipam/agent/plugins/controller"
	"github.com/contiv-ipam/agent/plugins/ipam"
	"github.com/contiv-ipam/agent/plugins/ksr"
	"github.com/contiv-ipam/agent/plugins/nodesync"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// recorder is the registry the plugins get: it keeps every collector their
// Init registers, so that the test can Describe them (a Registry cannot be
// asked what it holds).
type recorder struct{ collectors []prometheus.Collector }

var (
	_ metrics.API           = (*recorder)(nil)
	_ prometheus.Registerer = (*recorder)(nil)
)

func (r *recorder) Registerer() prometheus.Registerer { return r }

func (r *recorder) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return nil
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	r.collectors = append(r.collectors, cs...)
}

func (r *recorder) Unregister(prometheus.Collector) bool { return true }

// metricKind is what the test knows of a metric's type: kindUnknown when
// it has no sample to tell (a vector without children).
type metricKind int

const (
	kindUnknown metricKind = iota
	kindOther
	kindHistogram
	kindSummary
)

// exported are the metric names the binaries export, with their kinds.
type exported map[string]metricKind

// exportedMetrics builds the plugins of contiv-agent and contiv-ksr as
// cmd/contiv-agent and cmd/contiv-ksr wire them (the same plugins, each
// given the metrics dependency), runs the Init that registers their
// collectors, and returns every name the collectors describe, plus the Go
// and process collectors the metrics plugin adds. Nothing is started:
// AfterInit is not called, stores are never opened.
func exportedMetrics(t *testing.T) exported {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	rec := &recorder{}
	label := servicelabel.NewPlugin(servicelabel.UseLabel("node-1"), servicelabel.UseDeps(func(d *servicelabel.Deps) { d.Log = log }))
	db := etcd.NewPlugin(etcd.UseDeps(func(d *etcd.Deps) { d.Log = log }))

	// contiv-agent (cmd/contiv-agent/contiv_agent.go).
	loop := &controller.LoopRef{}
	conf := contivconf.NewPlugin(contivconf.UseDeps(func(d *contivconf.Deps) {
		d.Log, d.ServiceLabel, d.Metrics = log, label, rec
	}), contivconf.UseConf(contivconf.DefaultConfig()))
	sync := nodesync.NewPlugin(nodesync.UseDeps(func(d *nodesync.Deps) {
		d.Log, d.ServiceLabel, d.EventLoop, d.Metrics = log, label, loop, rec
	}), nodesync.UseConf(nodesync.DefaultConfig()))
	ipamPlugin := ipam.NewPlugin(ipam.UseDeps(func(d *ipam.Deps) {
		d.Log, d.ContivConf, d.NodeSync, d.ServiceLabel, d.Metrics = log, conf, sync, label, rec
	}), ipam.UseConf(ipam.DefaultConfig()))
	pods := podmanager.NewPlugin(podmanager.UseDeps(func(d *podmanager.Deps) {
		d.Log, d.EventLoop, d.IPAM, d.Metrics = log, loop, ipamPlugin, rec
	}), podmanager.UseConf(podmanager.DefaultConfig()))
	ctl := controller.NewPlugin(controller.UseLoopRef(loop), controller.UseDeps(func(d *controller.Deps) {
		d.Log, d.RemoteDB, d.Metrics = log, db, rec
	}), controller.UseConf(controller.DefaultConfig()))
	// contiv-ksr (cmd/contiv-ksr/contiv_ksr.go).
	ksrPlugin := ksr.NewPlugin(ksr.UseDeps(func(d *ksr.Deps) {
		d.Log, d.DB, d.Election, d.Metrics = log, db, db, rec
	}), ksr.UseConf(ksr.DefaultConfig()), ksr.UseClient(fake.NewClientset()))
	// Both binaries (infra/command.NewBase).
	healthPlugin := health.NewPlugin(health.UseDeps(func(d *health.Deps) { d.Log, d.Metrics = log, rec }),
		health.UseConf(health.DefaultConfig()))
	runtime := prometheus.NewRegistry()
	metricsPlugin := metrics.NewPlugin(metrics.UseRegistry(runtime), metrics.UseConf(metrics.DefaultConfig()),
		metrics.UseDeps(func(d *metrics.Deps) { d.Log = log }))

	for _, p := range []infra.Plugin{label, metricsPlugin, healthPlugin, conf, sync, pods, ipamPlugin, ctl, ksrPlugin} {
		if err := p.Init(); err != nil {
			t.Fatalf("Init %T: %v", p, err)
		}
		t.Cleanup(func() {
			if err := p.Close(); err != nil {
				t.Errorf("Close %T: %v", p, err)
			}
		})
	}

	out := exported{}
	describe(t, rec.collectors, out)
	mfs, err := runtime.Gather()
	if err != nil {
		t.Fatalf("gathering the runtime collectors: %v", err)
	}
	for _, mf := range mfs {
		out[mf.GetName()] = kindOf(mf.GetType())
	}
	return out
}

// describe adds the names every collector describes, then the kinds of
// those that collect a sample.
func describe(t *testing.T, collectors []prometheus.Collector, out exported) {
	t.Helper()
	if len(collectors) == 0 {
		t.Fatal("no plugin registered a collector")
	}
	descs := make(chan *prometheus.Desc)
	go func() {
		for _, c := range collectors {
			c.Describe(descs)
		}
		close(descs)
	}()
	for d := range descs {
		name, err := descName(d)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = kindUnknown
	}
	reg := prometheus.NewPedanticRegistry()
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			t.Fatalf("registering %T: %v", c, err)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gathering: %v", err)
	}
	for _, mf := range mfs {
		if _, ok := out[mf.GetName()]; !ok {
			t.Errorf("%s is collected but not described", mf.GetName())
		}
		out[mf.GetName()] = kindOf(mf.GetType())
	}
}

// descName is the fully-qualified name of d. A Desc shows its name only
// in String(), as `Desc{fqName: "<name>", ...}` with the name quoted by %q.
func descName(d *prometheus.Desc) (string, error) {
	s := d.String()
	rest, ok := strings.CutPrefix(s, "Desc{fqName: ")
	if !ok {
		return "", fmt.Errorf("unexpected Desc format: %s", s)
	}
	quoted, err := strconv.QuotedPrefix(rest)
	if err != nil {
		return "", fmt.Errorf("unexpected Desc format: %s: %w", s, err)
	}
	return strconv.Unquote(quoted)
}

func kindOf(t dto.MetricType) metricKind {
	switch t {
	case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
		return kindHistogram
	case dto.MetricType_SUMMARY:
		return kindSummary
	}
	return kindOther
}
