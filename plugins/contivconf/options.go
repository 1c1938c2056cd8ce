package contivconf

import "github.com/contiv-ipam/agent/infra/config"

// Name is the plugin's name (its logger name).
const Name = "contivconf"

// ConfigFlag is the flag (env CONTIV_CONFIG) naming the config file, and
// ConfigFile the default file name, looked up in -config-dir / CONFIG_DIR,
// else in the working directory.
const (
	ConfigFlag = "contiv-config"
	ConfigFile = "contiv.conf"
)

// Option changes the plugin NewPlugin builds.
type Option func(*Plugin)

// NewPlugin returns the plugin named "contivconf", reading contiv.conf
// (flag -contiv-config, env CONTIV_CONFIG).
func NewPlugin(opts ...Option) *Plugin {
	p := &Plugin{}
	p.SetName(Name)
	p.Cfg = config.ForPlugin(Name, config.WithFlag(ConfigFlag, ConfigFile))
	for _, o := range opts {
		o(p)
	}
	p.Setup()
	return p
}

// DefaultPlugin is NewPlugin with no options; cmd/ sets ServiceLabel
// with UseDeps.
func DefaultPlugin() *Plugin { return NewPlugin() }

// UseDeps lets the caller set the dependencies.
func UseDeps(f func(*Deps)) Option { return func(p *Plugin) { f(&p.Deps) } }

// UseConf replaces contiv.conf: Init validates c instead of reading a
// file. Start from DefaultConfig() (or DecodeConfig) and change what the
// test needs; c is copied.
func UseConf(c Config) Option {
	return func(p *Plugin) {
		cc := cloneConfig(&c)
		p.fixedConf = &cc
	}
}
