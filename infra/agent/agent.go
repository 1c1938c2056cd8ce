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

	// mu guards the fields below; the start goroutine (runPhases) and the
	// goroutine running Start or Stop share them.
	mu       sync.Mutex
	inited   []infra.Plugin // plugins whose Init returned and not yet closed, in order
	calling  infra.Plugin   // plugin whose Init or AfterInit runs now, or nil
	phase    string         // "Init" or "AfterInit" of calling
	step     string         // what start or stop is doing now
	aborting bool           // start timed out: no further steps
	pending  string         // "plugin x (Init)" still running at the timeout, closed when it returns
	late     chan error     // outcome of closing the pending plugin (buffered, one value)
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
	a := &Agent{opts: o, plugins: plugins, stopped: make(chan struct{}), late: make(chan error, 1), log: o.Logger}
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
	config.RegisterDirFlag(fs)
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

// Stop closes every started plugin in reverse order. After a failed
// Start it waits (within the stop timeout) for a plugin whose Init or
// AfterInit was still running at the start timeout to be closed.
func (a *Agent) Stop() error {
	if !a.startCalled.Load() {
		return ErrNotStarted
	}
	_ = a.Start() // wait for a concurrent Start to finish
	a.stopOnce.Do(func() {
		if a.startErr == nil {
			a.stopErr = a.closeAll(a.opts.StopTimeout)
		} else {
			a.stopErr = a.waitLate(a.opts.StopTimeout)
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
		return errors.Join(err, a.Stop())
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
		list, step, pending := a.abort()
		err := fmt.Errorf("start timeout %v exceeded while %s", a.opts.StartTimeout, step)
		if pending != "" {
			err = fmt.Errorf("%w; %s is closed when that call returns", err, pending)
		}
		return errors.Join(err, a.closeList(list, a.opts.StopTimeout))
	}
}

// errAborted ends runPhases after the start timeout; nobody reads it.
var errAborted = errors.New("start aborted")

// runPhases checks the config directory, calls LoadConfig on every
// ConfigLoader, then Init on all plugins, then AfterInit.
func (a *Agent) runPhases() error {
	if err := a.loadConfigs(); err != nil {
		return err
	}
	for _, p := range a.plugins {
		if err := a.call(p, "Init", "init", p.Init); err != nil {
			return err
		}
	}
	for _, p := range a.plugins {
		if post, ok := p.(infra.PostInit); ok {
			if err := a.call(p, "AfterInit", "after-init", post.AfterInit); err != nil {
				return err
			}
		}
	}
	return nil
}

// loadConfigs refuses a config directory that cannot be right, then loads
// every plugin's config, before any Init: nothing is created on disk for a
// config that is refused.
func (a *Agent) loadConfigs() error {
	if _, _, err := config.Dir(a.flags, nil); err != nil {
		return err
	}
	for _, p := range a.plugins {
		if l, ok := p.(infra.ConfigLoader); ok {
			if err := a.call(p, "LoadConfig", "load config", l.LoadConfig); err != nil {
				return err
			}
		}
	}
	return nil
}

// call runs one lifecycle call of p unless start was aborted. A call that
// returns after the start timeout closes p (nobody else will) and aborts.
func (a *Agent) call(p infra.Plugin, phase, errPhase string, fn func() error) error {
	if !a.begin(p, phase) {
		return errAborted
	}
	err := timed(a.log, p, phase, fn)
	if a.end(p, phase == "Init") {
		a.closeLate(p, phase, errPhase, err)
		return errAborted
	}
	if err != nil {
		return pluginError(p, errPhase, err)
	}
	return nil
}

// begin records that p's phase runs now; false once start was aborted.
func (a *Agent) begin(p infra.Plugin, phase string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.aborting {
		return false
	}
	a.calling, a.phase = p, phase
	a.step = fmt.Sprintf("plugin %s runs %s", p, phase)
	return true
}

// end records that p's call returned; it reports whether start was aborted
// meanwhile (p is then the caller's to close). Otherwise a returned Init
// puts p on the list to close.
func (a *Agent) end(p infra.Plugin, inited bool) (late bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calling = nil
	if a.aborting {
		return true
	}
	if inited {
		a.inited = append(a.inited, p)
	}
	return false
}

// abort stops start at the timeout. It returns the plugins to close now:
// every initialised one except a plugin whose AfterInit still runs, which
// like a plugin still in Init is closed when its call returns (pending).
func (a *Agent) abort() (list []infra.Plugin, step, pending string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.aborting = true
	for _, p := range a.inited {
		if p != a.calling {
			list = append(list, p)
		}
	}
	a.inited = nil
	if a.calling != nil {
		a.pending = fmt.Sprintf("plugin %s (%s)", a.calling, a.phase)
	}
	return list, a.step, a.pending
}

// closeLate closes p, whose call returned after the start timeout, and
// hands the outcome to Stop.
func (a *Agent) closeLate(p infra.Plugin, phase, errPhase string, callErr error) {
	a.log.Warn("plugin returned after the start timeout: closing it", "plugin", p.String(), "phase", phase, "error", callErr)
	var errs []error
	if callErr != nil {
		errs = append(errs, pluginError(p, errPhase, callErr))
	}
	if err := timed(a.log, p, "Close", p.Close); err != nil {
		errs = append(errs, pluginError(p, "close", err))
	}
	var err error
	if len(errs) > 0 {
		err = fmt.Errorf("plugin %s returned from %s after the start timeout and was closed: %w", p, phase, errors.Join(errs...))
	}
	a.late <- err
}

// waitLate waits, within timeout, for the plugin pending at the start
// timeout to be closed, and returns what went wrong with it.
func (a *Agent) waitLate(timeout time.Duration) error {
	a.mu.Lock()
	pending := a.pending
	a.mu.Unlock()
	if pending == "" {
		return nil
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case err := <-a.late:
		return err
	case <-timer.C:
		return fmt.Errorf("stop timeout %v exceeded: %s still runs since the start timeout; it is closed when that call returns", timeout, pending)
	}
}

// closeAll closes the plugins whose Init returned, in reverse order, all of
// them whatever fails, within timeout.
func (a *Agent) closeAll(timeout time.Duration) error {
	a.mu.Lock()
	list := a.inited
	a.inited = nil
	a.mu.Unlock()
	return a.closeList(list, timeout)
}

// closeList closes list in reverse order, all of it whatever fails, within
// timeout.
func (a *Agent) closeList(list []infra.Plugin, timeout time.Duration) error {
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
