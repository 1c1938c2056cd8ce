package agent

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/contiv-ipam/agent/infra"
	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/logging"
)

// ErrNotStarted is returned by Stop and Wait before Start was called.
var ErrNotStarted = errors.New("agent not started")

// Agent starts and stops a list of plugins; see the package doc.
type Agent struct {
	opts    Options
	plugins []infra.Plugin
	flags   *flag.FlagSet
	log     *slog.Logger

	startCalled atomic.Bool
	startOnce   sync.Once
	startErr    error
	stopOnce    sync.Once
	stopErr     error
	stopped     chan struct{}

	mu       sync.Mutex
	inited   []infra.Plugin // plugins whose Init returned, in order
	step     string         // what start or stop is doing now
	aborting atomic.Bool    // start timed out: do no further steps
}

// NewAgent lists the plugins, rejects duplicate names, registers the
// plugins' flags and parses the command line.
func NewAgent(opts ...Option) (*Agent, error) {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	var plugins []infra.Plugin
	var err error
	if o.Discover {
		plugins, err = findPlugins(o.Roots)
	} else {
		plugins, err = listPlugins(o.Roots)
	}
	if err != nil {
		return nil, err
	}
	a := &Agent{opts: o, plugins: plugins, stopped: make(chan struct{}), log: o.Logger}
	if a.log == nil {
		a.log = logging.Default().Logger("agent")
	}
	if err := a.parseFlags(); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *Agent) parseFlags() error {
	fs := a.opts.FlagSet
	if fs == nil {
		fs = flag.NewFlagSet(filepath.Base(os.Args[0]), flag.ContinueOnError)
	}
	if fs.Lookup(config.DirFlag) == nil {
		fs.String(config.DirFlag, ".", "directory searched for plugin config files (env CONFIG_DIR)")
	}
	for _, p := range a.plugins {
		if r, ok := p.(config.FlagRegistrar); ok {
			r.RegisterFlags(fs)
		}
	}
	a.flags = fs
	if fs.Parsed() {
		return nil
	}
	return fs.Parse(a.opts.Args)
}

// Plugins returns the plugins in start order.
func (a *Agent) Plugins() []infra.Plugin { return append([]infra.Plugin(nil), a.plugins...) }

// FlagSet returns the parsed command line.
func (a *Agent) FlagSet() *flag.FlagSet { return a.flags }

// Options returns what the agent was built with.
func (a *Agent) Options() Options { return a.opts }

// After returns a channel closed once the agent has stopped.
func (a *Agent) After() <-chan struct{} { return a.stopped }

// Start calls Init then AfterInit on all plugins, unwinding on failure.
func (a *Agent) Start() error {
	a.startOnce.Do(func() {
		a.startCalled.Store(true)
		a.startErr = a.start()
	})
	return a.startErr
}

// Stop closes every started plugin in reverse order.
func (a *Agent) Stop() error {
	if !a.startCalled.Load() {
		return ErrNotStarted
	}
	_ = a.Start() // wait for a concurrent Start to finish
	a.stopOnce.Do(func() {
		if a.startErr == nil {
			a.stopErr = a.closeAll(a.opts.StopTimeout)
		}
		close(a.stopped)
	})
	return a.stopErr
}

// Wait blocks until the agent has stopped and returns Stop's error.
func (a *Agent) Wait() error {
	if !a.startCalled.Load() {
		return ErrNotStarted
	}
	<-a.stopped
	return a.stopErr
}

// Run starts the agent, waits for a quit signal, the quit channel, the
// context or a Stop call, then stops it. It returns the start error or the
// stop error.
func (a *Agent) Run() error {
	sig := make(chan os.Signal, 1)
	if len(a.opts.QuitSignals) > 0 {
		signal.Notify(sig, a.opts.QuitSignals...)
		defer signal.Stop(sig)
	}
	v := a.opts.Version
	a.log.Info("starting agent", "version", v.Version, "date", v.Date, "commit", v.Commit,
		"plugins", len(a.plugins))
	if err := a.Start(); err != nil {
		_ = a.Stop()
		return err
	}
	var ctxDone <-chan struct{}
	if a.opts.Context != nil {
		ctxDone = a.opts.Context.Done()
	}
	select {
	case s := <-sig:
		a.log.Info("stopping agent", "signal", s.String())
	case <-a.opts.QuitChan:
		a.log.Info("stopping agent", "reason", "quit channel closed")
	case <-ctxDone:
		a.log.Info("stopping agent", "reason", "context done")
	case <-a.stopped:
	}
	return a.Stop()
}

// start runs both phases under the start timeout.
func (a *Agent) start() error {
	began := time.Now()
	done := make(chan error, 1)
	go func() { done <- a.runPhases() }()
	timer := time.NewTimer(a.opts.StartTimeout)
	defer timer.Stop()
	select {
	case err := <-done:
		if err != nil {
			return errors.Join(err, a.closeAll(a.opts.StopTimeout))
		}
		a.log.Info("agent started", "plugins", len(a.plugins), "took", time.Since(began).Round(time.Millisecond))
		return nil
	case <-timer.C:
		a.aborting.Store(true)
		err := fmt.Errorf("start timeout %v exceeded while %s", a.opts.StartTimeout, a.currentStep())
		return errors.Join(err, a.closeAll(a.opts.StopTimeout))
	}
}

// runPhases calls Init on all plugins, then AfterInit.
func (a *Agent) runPhases() error {
	for _, p := range a.plugins {
		if a.aborting.Load() {
			return nil
		}
		a.setStep(fmt.Sprintf("plugin %s runs Init", p))
		err := timed(a.log, p, "Init", p.Init)
		a.mu.Lock()
		a.inited = append(a.inited, p)
		a.mu.Unlock()
		if err != nil {
			return pluginError(p, "init", err)
		}
	}
	for _, p := range a.plugins {
		post, ok := p.(infra.PostInit)
		if !ok || a.aborting.Load() {
			continue
		}
		a.setStep(fmt.Sprintf("plugin %s runs AfterInit", p))
		if err := timed(a.log, p, "AfterInit", post.AfterInit); err != nil {
			return pluginError(p, "after-init", err)
		}
	}
	return nil
}

// closeAll closes the plugins whose Init returned, in reverse order, all of
// them whatever fails, within timeout.
func (a *Agent) closeAll(timeout time.Duration) error {
	a.mu.Lock()
	list := a.inited
	a.inited = nil
	a.mu.Unlock()
	done := make(chan error, 1)
	go func() {
		var errs []error
		for i := len(list) - 1; i >= 0; i-- {
			p := list[i]
			a.setStep(fmt.Sprintf("plugin %s runs Close", p))
			if err := timed(a.log, p, "Close", p.Close); err != nil {
				errs = append(errs, pluginError(p, "close", err))
			}
		}
		done <- errors.Join(errs...)
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
		return fmt.Errorf("stop timeout %v exceeded while %s", timeout, a.currentStep())
	}
}

func (a *Agent) setStep(s string) {
	a.mu.Lock()
	a.step = s
	a.mu.Unlock()
}

func (a *Agent) currentStep() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.step
}

// timed runs one lifecycle call and logs how long it took: at Info when
// slow, at Debug otherwise.
func timed(log *slog.Logger, p infra.Plugin, phase string, fn func() error) error {
	began := time.Now()
	err := fn()
	took := time.Since(began)
	level := slog.LevelDebug
	if took > time.Second {
		level = slog.LevelInfo
	}
	log.Log(context.Background(), level, "plugin "+phase, "plugin", p.String(), "took", took.Round(time.Microsecond), "error", err)
	return err
}

// pluginError is the one place that prefixes errors with the plugin name.
func pluginError(p infra.Plugin, phase string, err error) error {
	return fmt.Errorf("plugin %s: %s: %w", p, phase, err)
}
