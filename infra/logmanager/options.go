package logmanager

// Name is the plugin's name: its logger and config file (logmanager.conf).
const Name = "logmanager"

// Option changes a Plugin built by NewPlugin.
type Option func(*Plugin)

// NewPlugin builds a logmanager plugin named "logmanager".
func NewPlugin(opts ...Option) *Plugin {
	p := &Plugin{}
	p.SetName(Name)
	for _, o := range opts {
		o(p)
	}
	p.Setup()
	return p
}

// UseDeps lets the caller set or replace dependencies (LogRegistry, HTTP,
// logger, config accessor).
func UseDeps(f func(*Deps)) Option {
	return func(p *Plugin) { f(&p.Deps) }
}

// UseConf makes the plugin use c instead of reading logmanager.conf.
// INITIAL_LOGLVL still wins over c.DefaultLevel.
func UseConf(c Config) Option {
	return func(p *Plugin) { p.fixedConf = &c }
}
