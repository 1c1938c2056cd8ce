package podmanager

// Name is the plugin's name: its logger, its config file (podmanager.conf),
// its handler name in the event history and its health entry.
const Name = "podmanager"

// Option changes the plugin NewPlugin builds.
type Option func(*Plugin)

// NewPlugin returns the podmanager plugin; options are applied in order,
// then the missing logger and config accessor are filled.
func NewPlugin(opts ...Option) *Plugin {
	p := &Plugin{pods: newPodTable()}
	p.SetName(Name)
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

// UseConf replaces podmanager.conf.
func UseConf(c Config) Option { return func(p *Plugin) { p.fixedConf = &c } }
