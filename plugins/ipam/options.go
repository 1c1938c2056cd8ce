package ipam

// Option changes the plugin NewPlugin builds.
type Option func(*Plugin)

// NewPlugin returns the IPAM plugin named "ipam".
func NewPlugin(opts ...Option) *Plugin {
	p := &Plugin{}
	p.SetName("ipam")
	for _, o := range opts {
		o(p)
	}
	p.Setup()
	return p
}

// DefaultPlugin is NewPlugin with no options; set the dependencies before
// the agent starts.
func DefaultPlugin() *Plugin { return NewPlugin() }

// UseDeps lets the caller set the dependencies.
func UseDeps(f func(*Deps)) Option { return func(p *Plugin) { f(&p.Deps) } }

// UseConf replaces ipam.conf.
func UseConf(c Config) Option { return func(p *Plugin) { p.fixedConf = &c } }
