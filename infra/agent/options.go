package agent

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"syscall"
	"time"

	"github.com/contiv-ipam/agent/infra"
)

// Default timeouts.
const (
	DefaultStartTimeout = 15 * time.Second
	DefaultStopTimeout  = 5 * time.Second
)

// Options are what NewAgent was given.
type Options struct {
	// Roots are the plugins given to AllPlugins or Plugins.
	Roots []infra.Plugin
	// Discover tells whether Roots are walked for dependencies (AllPlugins).
	Discover     bool
	StartTimeout time.Duration
	StopTimeout  time.Duration
	QuitSignals  []os.Signal
	QuitChan     <-chan struct{}
	Context      context.Context
	Args         []string
	FlagSet      *flag.FlagSet
	Logger       *slog.Logger
	Version      BuildInfo
}

// BuildInfo identifies the binary; Run logs it at start.
type BuildInfo struct {
	Version, Date, Commit string
}

// Option changes one of the Options.
type Option func(*Options)

func defaultOptions() Options {
	return Options{
		StartTimeout: DefaultStartTimeout,
		StopTimeout:  DefaultStopTimeout,
		QuitSignals:  []os.Signal{os.Interrupt, syscall.SIGTERM},
		Args:         os.Args[1:],
	}
}

// AllPlugins gives the top-level plugins; their dependencies are found
// through their exported fields and started first.
func AllPlugins(p ...infra.Plugin) Option {
	return func(o *Options) { o.Roots, o.Discover = append(o.Roots, p...), true }
}

// Plugins gives the exact list of plugins, started in this order.
func Plugins(p ...infra.Plugin) Option {
	return func(o *Options) { o.Roots = append(o.Roots, p...) }
}

// StartTimeout bounds Init plus AfterInit of all plugins.
func StartTimeout(d time.Duration) Option { return func(o *Options) { o.StartTimeout = d } }

// StopTimeout bounds Close of all plugins.
func StopTimeout(d time.Duration) Option { return func(o *Options) { o.StopTimeout = d } }

// QuitSignals replaces the signals that make Run stop (default SIGINT,
// SIGTERM). No signals means Run ignores signals.
func QuitSignals(sig ...os.Signal) Option { return func(o *Options) { o.QuitSignals = sig } }

// QuitOnClose makes Run stop when ch is closed.
func QuitOnClose(ch <-chan struct{}) Option { return func(o *Options) { o.QuitChan = ch } }

// Context makes Run stop when ctx is done.
func Context(ctx context.Context) Option { return func(o *Options) { o.Context = ctx } }

// Args replaces os.Args[1:] as the command line to parse.
func Args(args []string) Option { return func(o *Options) { o.Args = args } }

// FlagSet gives the FlagSet the plugins' flags are registered on (default: a
// new one named after the program, returning errors instead of exiting).
func FlagSet(fs *flag.FlagSet) Option { return func(o *Options) { o.FlagSet = fs } }

// Logger replaces the agent's own logger.
func Logger(l *slog.Logger) Option { return func(o *Options) { o.Logger = l } }

// Version records the build information logged at start.
func Version(version, date, commit string) Option {
	return func(o *Options) { o.Version = BuildInfo{Version: version, Date: date, Commit: commit} }
}
