package main

import (
	"github.com/contiv-ipam/agent/infra"
	"github.com/contiv-ipam/agent/infra/command"
	"github.com/contiv-ipam/agent/infra/health"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd"
	"github.com/contiv-ipam/agent/infra/logging"
	"github.com/contiv-ipam/agent/infra/logmanager"
	"github.com/contiv-ipam/agent/infra/metrics"
	"github.com/contiv-ipam/agent/infra/rest"
	"github.com/contiv-ipam/agent/plugins/ksr"
)

// pluginName names the top-level plugin (and its logger).
const pluginName = "contiv-ksr"

// ContivKSR is the top-level plugin of contiv-ksr: its exported fields are
// every plugin it runs, so the agent finds and orders them by reflection.
type ContivKSR struct {
	infra.PluginDeps

	LogManager *logmanager.Plugin
	HTTP       *rest.Plugin
	Metrics    *metrics.Plugin
	Health     *health.Plugin
	ETCD       *etcd.Plugin
	KSR        *ksr.Plugin
}

var (
	_ infra.Plugin   = (*ContivKSR)(nil)
	_ infra.PostInit = (*ContivKSR)(nil)
)

// newContivKSR wires every plugin with one shared log registry. REST,
// health and metrics are served on ksr.DefaultEndpoint (127.0.0.1:9191)
// unless http.conf says otherwise, so that contiv-ksr and an agent can
// run on one machine.
func newContivKSR(reg *logging.Registry, build health.BuildInfo) *ContivKSR {
	base := command.NewBase(reg, build, rest.UseDefaultEndpoint(ksr.DefaultEndpoint))
	k := &ContivKSR{
		HTTP:       base.HTTP,
		Metrics:    base.Metrics,
		Health:     base.Health,
		LogManager: base.LogManager,
		ETCD:       base.ETCD,
		KSR: ksr.NewPlugin(ksr.UseDeps(func(d *ksr.Deps) {
			d.LogRegistry = reg
			d.DB, d.Election = base.ETCD, base.ETCD
			d.HTTP, d.Metrics, d.StatusCheck = base.HTTP, base.Metrics, base.Health
		})),
	}
	k.SetName(pluginName)
	k.LogRegistry = reg
	k.SetupLog()
	return k
}

// Init has nothing to do: the plugins it lists are initialised before it.
func (k *ContivKSR) Init() error { return nil }

// AfterInit reports contiv-ksr healthy and logs where to look.
func (k *ContivKSR) AfterInit() error {
	k.Health.ReportStateChange(k.String(), health.OK, nil)
	if addr := k.HTTP.Addr(); addr != "" {
		scheme := "http"
		if k.HTTP.TLS() {
			scheme = "https"
		}
		base := scheme + "://" + addr
		k.Log.Info("contiv-ksr ready", "rest", base+"/", "status", base+ksr.StatusPath,
			"readiness", base+"/readiness", "metrics", base+"/metrics")
	}
	return nil
}

// Close has nothing to release.
func (k *ContivKSR) Close() error { return nil }
