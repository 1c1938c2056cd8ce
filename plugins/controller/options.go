package controller

import "github.com/contiv-ipam/agent/plugins/controller/api"

// Option changes the plugin NewPlugin builds.
type Option func(*Plugin)

// NewPlugin returns the controller named "controller".
func NewPlugin(opts ...Option) *Plugin {
	p := &Plugin{}
	p.SetName("controller")
	for _, o := range opts {
		o(p)
	}
	p.Setup()
	return p
}

// DefaultPlugin is NewPlugin with no options; set RemoteDB, LocalDB and
// EventHandlers before the agent starts.
func DefaultPlugin() *Plugin { return NewPlugin() }

// UseDeps lets the caller set the dependencies.
func UseDeps(f func(*Deps)) Option { return func(p *Plugin) { f(&p.Deps) } }

// UseConf replaces controller.conf.
func UseConf(c Config) Option { return func(p *Plugin) { p.fixedConf = &c } }

// UseHandlers sets the event handlers, in processing order.
func UseHandlers(h ...api.EventHandler) Option {
	return func(p *Plugin) { p.EventHandlers = h }
}
