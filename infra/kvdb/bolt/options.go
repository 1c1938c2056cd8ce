package bolt

import (
	"os"
	"time"
)

// Option changes a Plugin built by NewPlugin.
type Option func(*Plugin)

// NewPlugin builds a bolt plugin; options are applied in order, then the
// missing dependencies (logger, config file accessor) are filled in.
func NewPlugin(opts ...Option) *Plugin {
	p := &Plugin{env: os.LookupEnv, now: time.Now}
	p.SetName("bolt")
	for _, o := range opts {
		o(p)
	}
	p.Setup()
	return p
}

// DefaultPlugin builds the plugin with default dependencies; use it only
// in cmd/.
func DefaultPlugin() *Plugin { return NewPlugin() }

// UseDeps lets the caller set dependencies (Log, Cfg, ...).
func UseDeps(f func(*Deps)) Option {
	return func(p *Plugin) { f(&p.Deps) }
}

// UseConf sets the configuration that bolt.conf is decoded over, in place
// of DefaultConfig(); keys the file sets still win.
func UseConf(c Config) Option {
	return func(p *Plugin) { p.base = &c }
}

// UseEnv replaces os.LookupEnv for the flags' environment fallbacks
// (BOLT_RECOVER); for tests.
func UseEnv(lookup func(string) (string, bool)) Option {
	return func(p *Plugin) { p.env = lookup }
}

// StallEnv names the environment variable of a binary built with the
// faults tag that stalls commits (faults.go): "P,MIN,MAX", each commit
// stalled with probability P for MIN to MAX. A binary built without the
// tag refuses to start with it set. UseCommitHook wins over it.
const StallEnv = "CONTIV_BOLT_STALL"

// UseCommitHook (fault-injection tests) makes the committer call fn
// before each commit, with the number of write requests in it. fn runs on
// the committer's goroutine: while it blocks, the commit and every write
// queued behind it wait, as on a stalled disk; the requests of the batch
// are taken already (not withdrawable), those queued behind are not.
func UseCommitHook(fn func(requests int)) Option {
	return func(p *Plugin) { p.commitHook = fn }
}
