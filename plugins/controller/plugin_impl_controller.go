package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/contiv-ipam/agent/infra"
	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/health"
	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/infra/metrics"
	"github.com/contiv-ipam/agent/infra/rest"
	"github.com/contiv-ipam/agent/plugins/controller/api"
)

// Deps are the controller's dependencies.
type Deps struct {
	infra.PluginDeps
	// RemoteDB is etcd: the Kubernetes state is listed and watched there.
	RemoteDB kvdb.Store
	// LocalDB is bolt: the mirror of the Kubernetes state; optional.
	LocalDB kvdb.Store
	// EventHandlers are called in this order (reversed for Reverse updates).
	EventHandlers []api.EventHandler
	// Southbound receives the desired configuration; nil = in memory.
	Southbound Southbound
	HTTP       rest.HTTPHandlers // optional
	Metrics    metrics.API       // optional
	// StatusCheck receives the loop's health; optional.
	StatusCheck health.Reporter
	// NodeName names this node (the agent label): the DB watcher reads
	// its pods alone (config podLayout). Optional: nil reads the whole
	// Kubernetes state.
	NodeName func() string
}

// Plugin is the controller: the event loop, the DB watcher, the event
// history and their REST endpoints.
type Plugin struct {
	Deps

	fixedConf *Config
	loaded    config.Preloaded[Config]
	cfg       Config
	loop      *eventLoop
	watcher   stateWatcher
	metrics   *loopMetrics
	closeOnce sync.Once
	// historyReads holds a token per event-history request being answered
	// (at most eventHistoryMaxConcurrentReads).
	historyReads chan struct{}
}

// stateWatcher feeds the loop with the Kubernetes state (dbwatcher.Watcher).
type stateWatcher interface {
	Start()
	Stop()
	RequestResync()
}

var (
	_ infra.Plugin   = (*Plugin)(nil)
	_ infra.PostInit = (*Plugin)(nil)
	_ api.EventLoop  = (*Plugin)(nil)
)

// Init loads controller.conf, builds the loop and registers the REST
// handlers, metrics and health probe. Events can be pushed from here on;
// they wait for the first DB resync.
func (p *Plugin) Init() error {
	cfg, err := p.loadConfig()
	if err != nil {
		return err
	}
	p.cfg = cfg
	if p.Southbound == nil {
		p.Southbound = NewMemSouthbound()
	}
	if p.RemoteDB == nil {
		return errors.New("controller needs RemoteDB (the etcd plugin)")
	}
	p.metrics = newLoopMetrics()
	if p.Metrics != nil {
		if err := p.Metrics.Register(p.metrics); err != nil {
			return fmt.Errorf("registering controller metrics: %w", err)
		}
	}
	p.loop = newEventLoop(cfg, p.EventHandlers, p.Southbound, p.Log, p)
	p.metrics.queueLen = func() int { return len(p.loop.queue) }
	p.registerHealth()
	if p.HTTP != nil {
		p.registerHandlers()
	}
	p.loop.start()
	return nil
}

var _ infra.ConfigLoader = (*Plugin)(nil)

// LoadConfig decodes and validates controller.conf before any plugin's
// Init, so that a bad file is refused before anything is created on disk.
func (p *Plugin) LoadConfig() error { return p.loaded.Load(p.decodeConfig) }

// loadConfig is LoadConfig's config, else decoded now (without the
// agent's LoadConfig phase, as in unit tests).
func (p *Plugin) loadConfig() (Config, error) { return p.loaded.Get(p.decodeConfig) }

// decodeConfig is UseConf's config, else controller.conf over the defaults.
func (p *Plugin) decodeConfig() (Config, error) {
	return config.LoadOrFixed(p.Cfg, p.fixedConf, DefaultConfig())
}

// AfterInit starts the DB watcher, which pushes the first DB resync.
func (p *Plugin) AfterInit() error {
	w, err := p.newWatcher()
	if err != nil {
		return err
	}
	p.watcher = w
	w.Start()
	return nil
}

// Close makes commit retries give up, stops the watcher, lets the handlers
// see a Shutdown event (waiting at most shutdownTimeout), then stops the
// loop. No retry wait delays it: a commit that fails during Close is not
// retried.
func (p *Plugin) Close() error {
	var err error
	p.closeOnce.Do(func() {
		if p.loop != nil {
			p.loop.beginClose()
		}
		if p.watcher != nil {
			p.watcher.Stop()
		}
		if p.loop == nil {
			return
		}
		err = p.shutdown()
		p.loop.stop()
	})
	return err
}

// shutdownTimeout bounds the wait for the Shutdown event in Close.
const shutdownTimeout = 5 * time.Second

// shutdown pushes the Shutdown event and waits for it a bounded time.
// A loop already stopped by a fatal error has nothing to shut down; any
// other failure, a commit refused during Close included, is returned.
func (p *Plugin) shutdown() error {
	if p.loop.isClosed() {
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- p.loop.PushEvent(&api.Shutdown{}) }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("shutdown event: %w", err)
		}
		return nil
	case <-time.After(shutdownTimeout):
		return fmt.Errorf("shutdown event not processed within %s", shutdownTimeout)
	}
}

// PushEvent queues an event for the loop (api.EventLoop).
func (p *Plugin) PushEvent(ev api.Event) error {
	if p.loop == nil {
		return fmt.Errorf("push %s: controller not initialised: %w", ev.GetName(), api.ErrClosedController)
	}
	return p.loop.PushEvent(ev)
}

// PushEventWait queues an event like PushEvent, but waits for room in a
// full queue until ctx ends or the loop closes: the DB watcher's
// back-pressure (dbwatcher.Loop).
func (p *Plugin) PushEventWait(ctx context.Context, ev api.Event) error {
	if p.loop == nil {
		return fmt.Errorf("push %s: controller not initialised: %w", ev.GetName(), api.ErrClosedController)
	}
	return p.loop.PushEventWait(ctx, ev)
}

// RequestResync asks the DB watcher for a resync from etcd. It fails,
// wrapping api.ErrClosedController, when the resync could not run: the
// controller is not started, or its loop stopped (fatal error or Close).
func (p *Plugin) RequestResync() error {
	if p.loop == nil || p.watcher == nil {
		return fmt.Errorf("resync: controller not started: %w", api.ErrClosedController)
	}
	if err := p.loop.runnable(); err != nil {
		return fmt.Errorf("resync cannot run: %w", err)
	}
	p.watcher.RequestResync()
	return nil
}

// registerHealth registers the loop's probe with StatusCheck, for liveness
// too when the reporter supports it: a dead or stuck loop means the
// process must be restarted.
func (p *Plugin) registerHealth() {
	if p.StatusCheck == nil {
		return
	}
	probe := func() (health.State, error) { return p.loop.health(p.loop.now(), p.cfg.StuckEventTimeout) }
	if lr, ok := p.StatusCheck.(health.LivenessReporter); ok {
		lr.RegisterLiveness(p.String(), probe)
		return
	}
	p.StatusCheck.Register(p.String(), probe)
}

// EventHistory returns every recorded event, oldest first; nil before Init.
func (p *Plugin) EventHistory() []EventRecord {
	if p.loop == nil {
		return nil
	}
	return p.loop.history.query(historyQuery{}).records
}

// DesiredConfig returns what the southbound holds.
func (p *Plugin) DesiredConfig() map[string]proto.Message { return p.Southbound.Dump() }

// processed feeds the metrics (observer).
func (p *Plugin) processed(rec *EventRecord, err error) {
	p.metrics.observe(rec, err)
}

// stateChanged reports the loop's health (observer).
func (p *Plugin) stateChanged(started bool, fatal error) {
	if p.StatusCheck == nil {
		return
	}
	switch {
	case fatal != nil:
		p.StatusCheck.ReportStateChange(p.String(), health.Error, fatal)
	case started:
		p.StatusCheck.ReportStateChange(p.String(), health.OK, nil)
	}
}
