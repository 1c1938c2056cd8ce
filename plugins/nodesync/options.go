package nodesync

import (
	"os"

	"github.com/contiv-ipam/agent/infra/config"
)

// Name is the plugin's name (its logger name and its handler name in the
// event history).
const Name = "nodesync"

// Option changes the plugin NewPlugin builds.
type Option func(*Plugin)

// NewPlugin returns the nodesync plugin named "nodesync"; options are
// applied in order, then the missing logger is filled. The plugin reads no
// config file (config.NoFile, so there is no -nodesync-config flag): its
// settings are flags (config.go).
func NewPlugin(opts ...Option) *Plugin {
	p := &Plugin{maxAttempts: DefaultMaxClaimAttempts, env: os.LookupEnv, presSet: make(chan struct{}, 1)}
	p.SetName(Name)
	p.Cfg = config.NoFile
	for _, o := range opts {
		o(p)
	}
	p.Setup()
	return p
}

// DefaultPlugin is NewPlugin with no options; use it only in cmd/ and set
// the dependencies through UseDeps.
func DefaultPlugin() *Plugin { return NewPlugin() }

// UseDeps lets the caller set the dependencies.
func UseDeps(f func(*Deps)) Option { return func(p *Plugin) { f(&p.Deps) } }

// UseMaxClaimAttempts bounds the compare-and-swap attempts of one node ID
// claim (default DefaultMaxClaimAttempts); n < 1 keeps the default.
func UseMaxClaimAttempts(n int) Option {
	return func(p *Plugin) {
		if n >= 1 {
			p.maxAttempts = n
		}
	}
}

// UseConf replaces DefaultConfig() as the settings that the flags (and
// their environment variables) override.
func UseConf(c Config) Option { return func(p *Plugin) { p.base = &c } }

// UseEnv replaces os.LookupEnv for the flags' environment fallbacks (tests).
func UseEnv(lookup func(string) (string, bool)) Option {
	return func(p *Plugin) { p.env = lookup }
}
