package rest

// Name is the plugin's name: its logger, config file (http.conf) and flag
// prefix.
const Name = "http"

// Option changes a Plugin built by NewPlugin.
type Option func(*Plugin)

// NewPlugin builds a REST plugin named "http". Options run after the name
// is set and before the logger and config accessor are filled in.
func NewPlugin(opts ...Option) *Plugin {
	p := &Plugin{}
	p.SetName(Name)
	for _, o := range opts {
		o(p)
	}
	p.Setup()
	p.formatter = NewFormatter(p.Log)
	p.router = newRouter(p.Log)
	return p
}

// UseDeps lets the caller set or replace dependencies (logger, config
// accessor, log registry).
func UseDeps(f func(*Deps)) Option {
	return func(p *Plugin) { f(&p.Deps) }
}

// UseConf makes the plugin use c exactly as given (validated in Init):
// no config file is read and -http-port / HTTP_PORT are ignored.
func UseConf(c Config) Option {
	return func(p *Plugin) { p.fixedConf = &c }
}

// UseDefaultEndpoint makes endpoint the default of the "endpoint" key (in
// place of DefaultEndpoint): http.conf, -http-port and HTTP_PORT still
// override it. Commands other than the agent use it for their own port.
func UseDefaultEndpoint(endpoint string) Option {
	return func(p *Plugin) { p.defaultEndpoint = endpoint }
}
