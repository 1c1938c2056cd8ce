package health

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/contiv-ipam/agent/infra"
	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/rest"
)

// Deps are the plugin's dependencies; both are optional.
type Deps struct {
	infra.PluginDeps
	// HTTP serves /liveness and /readiness; nil means not served.
	HTTP rest.HTTPHandlers
	// Metrics receives the agent_health and agent_plugin_health gauges;
	// nil means no metrics. The metrics plugin is a Registerer.
	Metrics prometheus.Registerer
}

// Plugin keeps the health of every plugin and of the agent. Build it with
// NewPlugin.
type Plugin struct {
	Deps

	fixedConf *Config // from UseConf
	nonFatal  []string
	build     BuildInfo
	now       func() time.Time

	book      *statusBook
	conf      Config               // set by Init
	collector prometheus.Collector // registered by Init, removed by Close

	stop context.CancelFunc // set by AfterInit, cleared by Close
	done chan struct{}      // closed when the probe loop returns
}

var (
	_ infra.Plugin     = (*Plugin)(nil)
	_ infra.PostInit   = (*Plugin)(nil)
	_ Reporter         = (*Plugin)(nil)
	_ LivenessReporter = (*Plugin)(nil)
	_ StatusReader     = (*Plugin)(nil)
)

// Init reads the config and registers the REST endpoints and metrics.
func (p *Plugin) Init() error {
	conf, err := p.loadConfig()
	if err != nil {
		return err
	}
	p.conf = conf
	p.book.setNonFatal(append(append([]string(nil), p.nonFatal...), conf.NonFatalPlugins...))
	if p.Metrics != nil {
		c := newCollector(p.book)
		if err := p.Metrics.Register(c); err != nil {
			return fmt.Errorf("registering health metrics: %w", err)
		}
		p.collector = c
	}
	if p.HTTP != nil {
		p.registerHandlers()
	}
	return nil
}

func (p *Plugin) loadConfig() (Config, error) {
	return config.LoadOrFixed(p.Cfg, p.fixedConf, DefaultConfig())
}

// AfterInit starts polling the probes every probe-interval, the first
// round at once.
func (p *Plugin) AfterInit() error {
	if p.stop != nil {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.stop, p.done = cancel, make(chan struct{})
	go p.probeLoop(ctx, p.conf.ProbeInterval, p.done)
	return nil
}

func (p *Plugin) probeLoop(ctx context.Context, interval time.Duration, done chan struct{}) {
	defer close(done)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		p.RunProbes()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Close stops the probe loop, waits for it and removes the metrics.
func (p *Plugin) Close() error {
	if p.stop != nil {
		p.stop()
		<-p.done
		p.stop, p.done = nil, nil
	}
	if p.collector != nil {
		p.Metrics.Unregister(p.collector)
		p.collector = nil
	}
	return nil
}

// RunProbes polls every registered probe once, in name order, and records
// the results. The probe loop calls it; tests may call it directly.
func (p *Plugin) RunProbes() {
	for _, np := range p.book.probes() {
		state, err := callProbe(np.probe)
		if p.book.report(np.name, state, err) {
			p.Log.Debug("probe changed plugin state", "plugin", np.name, "state", state.String(), "error", err)
		}
	}
}

// callProbe runs one probe; a panic becomes an Error state.
func callProbe(probe Probe) (state State, err error) {
	defer func() {
		if r := recover(); r != nil {
			state, err = Error, fmt.Errorf("probe panicked: %v", r)
		}
	}()
	return probe()
}

// Register implements Reporter.
func (p *Plugin) Register(pluginName string, probe Probe) {
	p.book.register(pluginName, probe, false)
	p.Log.Debug("plugin registered", "plugin", pluginName, "probe", probe != nil)
}

// RegisterLiveness implements LivenessReporter.
func (p *Plugin) RegisterLiveness(pluginName string, probe Probe) {
	p.book.register(pluginName, probe, true)
	p.Log.Debug("plugin registered for liveness", "plugin", pluginName, "probe", probe != nil)
}

// ReportStateChange implements Reporter. An unregistered plugin is added.
func (p *Plugin) ReportStateChange(pluginName string, state State, err error) {
	if p.book.report(pluginName, state, err) {
		p.Log.Info("plugin state changed", "plugin", pluginName, "state", state.String(), "error", err)
	}
}

// GetAgentStatus implements StatusReader.
func (p *Plugin) GetAgentStatus() AgentStatus { return p.book.snapshot() }

// GetAllPluginStatus implements StatusReader.
func (p *Plugin) GetAllPluginStatus() []PluginStatus { return p.book.allPlugins() }
