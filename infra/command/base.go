package command

import (
	"github.com/contiv-ipam/agent/infra/health"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd"
	"github.com/contiv-ipam/agent/infra/logging"
	"github.com/contiv-ipam/agent/infra/logmanager"
	"github.com/contiv-ipam/agent/infra/metrics"
	"github.com/contiv-ipam/agent/infra/rest"
)

// Base are the framework plugins every binary runs, wired to one log
// registry: the REST server, Prometheus metrics on it, health (fed by
// the plugins, served on REST, counted in metrics), log levels over REST,
// and the etcd store reporting its connection to health. A binary puts
// them into its top-level plugin's fields.
type Base struct {
	HTTP       *rest.Plugin
	Metrics    *metrics.Plugin
	Health     *health.Plugin
	LogManager *logmanager.Plugin
	ETCD       *etcd.Plugin
}

// NewBase builds the framework plugins; restOpts go to the REST plugin
// (contiv-ksr moves its default port).
func NewBase(reg *logging.Registry, build health.BuildInfo, restOpts ...rest.Option) Base {
	httpP := rest.NewPlugin(append(restOpts, rest.UseDeps(func(d *rest.Deps) { d.LogRegistry = reg }))...)
	metricsP := metrics.NewPlugin(metrics.UseDeps(func(d *metrics.Deps) {
		d.LogRegistry = reg
		d.HTTP = httpP
	}))
	healthP := health.NewPlugin(health.UseBuildInfo(build), health.UseDeps(func(d *health.Deps) {
		d.LogRegistry = reg
		d.HTTP = httpP
		d.Metrics = metricsP
	}))
	return Base{
		HTTP:    httpP,
		Metrics: metricsP,
		Health:  healthP,
		LogManager: logmanager.NewPlugin(logmanager.UseDeps(func(d *logmanager.Deps) {
			d.LogRegistry = reg
			d.HTTP = httpP
		})),
		ETCD: etcd.NewPlugin(etcd.UseDeps(func(d *etcd.Deps) {
			d.LogRegistry = reg
			d.StatusCheck = healthP
		})),
	}
}
