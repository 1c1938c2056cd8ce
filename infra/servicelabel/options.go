package servicelabel

// Name is the plugin's name (its logger name).
const Name = "servicelabel"

// Option changes a Plugin built by NewPlugin.
type Option func(*Plugin)

// NewPlugin builds a servicelabel plugin named "servicelabel".
func NewPlugin(opts ...Option) *Plugin {
	p := &Plugin{}
	p.SetName(Name)
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
