package metrics

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/contiv-ipam/agent/infra"
	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/rest"
)

// Deps are the plugin's dependencies.
type Deps struct {
	infra.PluginDeps
	// HTTP serves the metrics; nil means they are not served.
	HTTP rest.HTTPHandlers
}

// Plugin owns the agent's Prometheus registry. Build it with NewPlugin.
// Besides API it implements prometheus.Registerer and prometheus.Gatherer.
type Plugin struct {
	Deps

	fixedConf *Config // from UseConf
	registry  *prometheus.Registry
	conf      Config                 // set by Init
	added     []prometheus.Collector // runtime collectors added by Init
}

var (
	_ infra.Plugin          = (*Plugin)(nil)
	_ API                   = (*Plugin)(nil)
	_ prometheus.Registerer = (*Plugin)(nil)
	_ prometheus.Gatherer   = (*Plugin)(nil)
)

// Init reads the config, adds the runtime collectors and attaches the
// handler.
func (p *Plugin) Init() error {
	conf, err := p.loadConfig()
	if err != nil {
		return err
	}
	p.conf = conf
	runtime := []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	}
	for _, c := range runtime {
		err := p.registry.Register(c)
		var already prometheus.AlreadyRegisteredError
		switch {
		case errors.As(err, &already):
			// an injected registry that has them already
		case err != nil:
			return fmt.Errorf("registering runtime collector: %w", err)
		default:
			p.added = append(p.added, c)
		}
	}
	if p.HTTP != nil {
		rest.RegisterDescribed(p.HTTP, conf.Path, "Prometheus metrics", p.handler, http.MethodGet)
	}
	return nil
}

func (p *Plugin) loadConfig() (Config, error) {
	return config.LoadOrFixed(p.Cfg, p.fixedConf, DefaultConfig())
}

// handler serves the live registry; a failing collector is logged and the
// other metrics are still served.
func (p *Plugin) handler(*rest.Formatter) http.HandlerFunc {
	h := promhttp.HandlerFor(p.registry, promhttp.HandlerOpts{
		ErrorLog:      errorLog{log: p.Log},
		ErrorHandling: promhttp.ContinueOnError,
	})
	return h.ServeHTTP
}

// Close removes the runtime collectors added by Init.
func (p *Plugin) Close() error {
	for _, c := range p.added {
		p.registry.Unregister(c)
	}
	p.added = nil
	return nil
}

// Registerer implements API.
func (p *Plugin) Registerer() prometheus.Registerer { return p.registry }

// Register implements API and prometheus.Registerer.
func (p *Plugin) Register(c prometheus.Collector) error { return p.registry.Register(c) }

// MustRegister implements prometheus.Registerer; it panics on error.
func (p *Plugin) MustRegister(cs ...prometheus.Collector) { p.registry.MustRegister(cs...) }

// Unregister implements prometheus.Registerer.
func (p *Plugin) Unregister(c prometheus.Collector) bool { return p.registry.Unregister(c) }

// Gather implements prometheus.Gatherer.
func (p *Plugin) Gather() ([]*dto.MetricFamily, error) { return p.registry.Gather() }

// errorLog passes promhttp's errors to the plugin's logger.
type errorLog struct{ log *slog.Logger }

func (e errorLog) Println(v ...any) { e.log.Error("serving metrics", "error", fmt.Sprint(v...)) }
