package metrics

import "github.com/prometheus/client_golang/prometheus"

// Name is the plugin's name: its logger and config file (metrics.conf).
const Name = "metrics"

// Option changes a Plugin built by NewPlugin.
type Option func(*Plugin)

// NewPlugin builds a metrics plugin named "metrics" with a registry of its
// own unless UseRegistry gives one.
func NewPlugin(opts ...Option) *Plugin {
	p := &Plugin{}
	p.SetName(Name)
	for _, o := range opts {
		o(p)
	}
	p.Setup()
	if p.registry == nil {
		p.registry = prometheus.NewRegistry()
	}
	return p
}

// UseDeps lets the caller set or replace dependencies (HTTP, logger, config
// accessor).
func UseDeps(f func(*Deps)) Option {
	return func(p *Plugin) { f(&p.Deps) }
}

// UseConf makes the plugin use c instead of reading metrics.conf.
func UseConf(c Config) Option {
	return func(p *Plugin) { p.fixedConf = &c }
}

// UseRegistry makes the plugin serve reg instead of a registry of its own.
func UseRegistry(reg *prometheus.Registry) Option {
	return func(p *Plugin) { p.registry = reg }
}
