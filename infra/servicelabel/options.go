package servicelabel

import "github.com/contiv-ipam/agent/infra/config"

// Name is the plugin's name (its logger name).
const Name = "servicelabel"

// Option changes a Plugin built by NewPlugin.
type Option func(*Plugin)

// NewPlugin builds a servicelabel plugin named "servicelabel". It reads
// no config file (config.NoFile): its one setting is a flag.
func NewPlugin(opts ...Option) *Plugin {
	p := &Plugin{}
	p.SetName(Name)
	p.Cfg = config.NoFile
	for _, o := range opts {
		o(p)
	}
	p.Setup()
	return p
}

// UseDeps lets the caller set or replace dependencies.
func UseDeps(f func(*Deps)) Option {
	return func(p *Plugin) { f(&p.Deps) }
}

// UseLabel fixes the label: the flag and the environment are ignored.
func UseLabel(label string) Option {
	return func(p *Plugin) { p.fixed = &label }
}
