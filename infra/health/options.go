package health

import "time"

// Name is the plugin's name: its logger and config file (health.conf).
const Name = "health"

// Option changes a Plugin built by NewPlugin.
type Option func(*Plugin)

// NewPlugin builds a health plugin named "health".
func NewPlugin(opts ...Option) *Plugin {
	p := &Plugin{now: time.Now}
	p.SetName(Name)
	for _, o := range opts {
		o(p)
	}
	p.Setup()
	p.book = newStatusBook(p.now)
	p.book.setBuildInfo(p.build)
	p.book.setNonFatal(p.nonFatal)
	return p
}

// UseDeps lets the caller set or replace dependencies (HTTP, Metrics,
// logger, config accessor).
func UseDeps(f func(*Deps)) Option {
	return func(p *Plugin) { f(&p.Deps) }
}

// UseConf makes the plugin use c instead of reading health.conf.
func UseConf(c Config) Option {
	return func(p *Plugin) { p.fixedConf = &c }
}

// WithNonFatalPlugins names plugins whose state does not count towards the
// agent state.
func WithNonFatalPlugins(names ...string) Option {
	return func(p *Plugin) { p.nonFatal = append(p.nonFatal, names...) }
}

// UseBuildInfo sets the version, date and commit shown in the agent status.
func UseBuildInfo(bi BuildInfo) Option {
	return func(p *Plugin) { p.build = bi }
}

// UseClock replaces time.Now (tests).
func UseClock(now func() time.Time) Option {
	return func(p *Plugin) { p.now = now }
}
