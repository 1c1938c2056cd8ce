package rest

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"

	"github.com/contiv-ipam/agent/infra"
	"github.com/contiv-ipam/agent/infra/config"
)

// PortFlag is the extra flag (env HTTP_PORT) that replaces the port of the
// configured endpoint.
const PortFlag = "http-port"

// Deps are the plugin's dependencies; it needs nothing but the basics.
type Deps struct {
	infra.PluginDeps
}

// Plugin is the agent's REST server. Build it with NewPlugin.
type Plugin struct {
	Deps

	fixedConf *Config // from UseConf
	// defaultEndpoint replaces DefaultEndpoint (UseDefaultEndpoint).
	defaultEndpoint string
	flags           *flag.FlagSet // from RegisterFlags, for -http-port
	formatter       *Formatter
	router          *router
	indexPage       indexPageHolder // SetIndexPage

	// Set by Init.
	conf    Config
	tls     *tls.Config
	auth    *authGate // nil when no client authentication is configured
	handler http.Handler

	// Set by AfterInit, cleared by Close.
	mu       sync.Mutex
	server   *http.Server
	listener net.Listener
	done     chan struct{} // closed when the serving goroutine returns
	serveErr error
}

var (
	_ infra.Plugin         = (*Plugin)(nil)
	_ infra.PostInit       = (*Plugin)(nil)
	_ config.FlagRegistrar = (*Plugin)(nil)
	_ HTTPHandlers         = (*Plugin)(nil)
	_ DescribedHandlers    = (*Plugin)(nil)
	_ IndexPageSetter      = (*Plugin)(nil)
	_ Advertiser           = (*Plugin)(nil)
)

// RegisterFlags adds -http-config, -config-dir and -http-port to fs.
func (p *Plugin) RegisterFlags(fs *flag.FlagSet) {
	p.PluginDeps.RegisterFlags(fs)
	if fs.Lookup(PortFlag) == nil {
		fs.String(PortFlag, "", "port of the REST server; replaces the port of the endpoint in http.conf (env HTTP_PORT)")
	}
	p.flags = fs
}

// Init loads the config, the TLS certificates and the index page.
func (p *Plugin) Init() error {
	conf, err := p.loadConfig()
	if err != nil {
		return err
	}
	p.conf = conf
	if conf.Disabled {
		p.Log.Info("HTTP server disabled by config")
		return nil
	}
	p.warnExposure()
	if p.tls, err = serverTLS(&conf); err != nil {
		return err
	}
	tmpl, err := parseIndexTemplate()
	if err != nil {
		return fmt.Errorf("index page template: %w", err)
	}
	p.router.handleIndex(indexHandler(p.router, p.formatter, tmpl, &p.indexPage))
	var h http.Handler = &jsonMux{mux: p.router.mux, f: p.formatter}
	if p.auth, err = newAuthGate(h, p.router.mux, p.formatter, &conf); err != nil {
		return fmt.Errorf("client-basic-auth: %w", err)
	}
	if p.auth != nil {
		h = p.auth
	}
	p.handler = &accessLog{next: h, log: p.Log}
	return nil
}

// loadConfig returns the validated config: UseConf's, or the defaults
// overridden by http.conf and then by -http-port / HTTP_PORT.
func (p *Plugin) loadConfig() (Config, error) {
	if p.fixedConf != nil {
		c := *p.fixedConf
		if c.Endpoint == "" {
			c.Endpoint = p.endpointDefault()
		}
		return c, c.Validate()
	}
	c := DefaultConfig()
	c.Endpoint = p.endpointDefault()
	if _, err := p.Cfg.LoadValue(&c); err != nil {
		return c, err
	}
	if c.Endpoint == "" {
		c.Endpoint = p.endpointDefault()
	}
	if port, set := config.Lookup(p.flags, PortFlag, "", nil); set {
		ep, err := withPort(c.Endpoint, port)
		if err != nil {
			return c, fmt.Errorf("flag -%s / env %s: %w", PortFlag, config.EnvName(PortFlag), err)
		}
		c.Endpoint = ep
	}
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("config %s: %w", config.SourceName(p.Cfg), err)
	}
	return c, nil
}

// endpointDefault is the endpoint used when the config names none.
func (p *Plugin) endpointDefault() string {
	if p.defaultEndpoint != "" {
		return p.defaultEndpoint
	}
	return DefaultEndpoint
}

// AfterInit listens on the endpoint (a port in use fails here) and serves
// in a goroutine that Close stops.
func (p *Plugin) AfterInit() error {
	if p.conf.Disabled || p.handler == nil {
		return nil
	}
	if err := p.router.failed(); err != nil {
		return fmt.Errorf("refused HTTP handlers: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.server != nil {
		return errors.New("already serving")
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(context.Background(), "tcp", p.conf.Endpoint)
	if err != nil {
		return fmt.Errorf("listen on endpoint %q: %w", p.conf.Endpoint, err)
	}
	srv := p.newServer()
	p.server, p.listener, p.done, p.serveErr = srv, ln, make(chan struct{}), nil
	go p.serve(srv, ln, p.done)
	p.Log.Info("serving HTTP", "address", ln.Addr().String(), "tls", p.tls != nil,
		"client-certs", p.auth != nil && p.auth.certs, "basic-auth", len(p.conf.ClientBasicAuth) > 0)
	return nil
}

func (p *Plugin) newServer() *http.Server {
	return &http.Server{
		Handler:           p.handler,
		ReadTimeout:       p.conf.ReadTimeout,
		ReadHeaderTimeout: p.conf.ReadHeaderTimeout,
		WriteTimeout:      p.conf.WriteTimeout,
		IdleTimeout:       p.conf.IdleTimeout,
		MaxHeaderBytes:    p.conf.MaxHeaderBytes,
		TLSConfig:         p.tls,
		ErrorLog:          slog.NewLogLogger(p.Log.Handler(), slog.LevelWarn),
	}
}

// serve runs until Close shuts srv down.
func (p *Plugin) serve(srv *http.Server, ln net.Listener, done chan struct{}) {
	defer close(done)
	var err error
	if p.tls != nil {
		err = srv.ServeTLS(ln, "", "")
	} else {
		err = srv.Serve(ln)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		p.Log.Error("HTTP server stopped", "error", err)
		p.mu.Lock()
		p.serveErr = fmt.Errorf("serving on %s: %w", ln.Addr(), err)
		p.mu.Unlock()
	}
}

// Close shuts the server down gracefully within shutdown-timeout (at once
// when it is 0) and waits for the serving goroutine. It is safe to call
// more than once and after a failed Init.
func (p *Plugin) Close() error {
	p.mu.Lock()
	srv, done := p.server, p.done
	p.server, p.listener = nil, nil
	p.mu.Unlock()
	if srv == nil {
		return nil
	}
	err := p.shutdown(srv)
	<-done
	p.mu.Lock()
	defer p.mu.Unlock()
	return errors.Join(err, p.serveErr)
}

func (p *Plugin) shutdown(srv *http.Server) error {
	if p.conf.ShutdownTimeout == 0 {
		return srv.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.conf.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		err = fmt.Errorf("graceful shutdown did not finish within shutdown-timeout %s: %w", p.conf.ShutdownTimeout, err)
		return errors.Join(err, srv.Close())
	}
	return nil
}

// RegisterHTTPHandler implements HTTPHandlers.
func (p *Plugin) RegisterHTTPHandler(path string, provider HandlerProvider, methods ...string) {
	p.RegisterDescribedHandler(path, "", provider, methods...)
}

// RegisterDescribedHandler implements DescribedHandlers.
func (p *Plugin) RegisterDescribedHandler(path, description string, provider HandlerProvider, methods ...string) {
	var h http.Handler
	if provider != nil {
		if hf := provider(p.formatter); hf != nil {
			h = hf
		}
	}
	p.router.handle(path, description, h, methods)
}

// SetIndexPage implements IndexPageSetter.
func (p *Plugin) SetIndexPage(fn IndexPageFunc) { p.indexPage.set(fn) }

// Endpoints returns every registered endpoint, sorted by path and method.
func (p *Plugin) Endpoints() []Endpoint { return p.router.list() }

// GetPort implements HTTPHandlers.
func (p *Plugin) GetPort() int {
	p.mu.Lock()
	ln := p.listener
	p.mu.Unlock()
	if ln != nil {
		if a, ok := ln.Addr().(*net.TCPAddr); ok {
			return a.Port
		}
	}
	if p.conf.Disabled {
		return 0
	}
	_, port, err := net.SplitHostPort(p.conf.Endpoint)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(port)
	return n
}

// Addr returns the address the server listens on ("127.0.0.1:41234"), or
// "" when it is not serving.
func (p *Plugin) Addr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.listener == nil {
		return ""
	}
	return p.listener.Addr().String()
}

// TLS reports whether the server speaks HTTPS (known after Init).
func (p *Plugin) TLS() bool { return p.tls != nil }

// AdvertiseURL implements Advertiser.
func (p *Plugin) AdvertiseURL(nodeIP netip.Addr) string {
	if p.conf.Disabled {
		return ""
	}
	return advertiseURL(&p.conf, p.Addr(), p.TLS(), nodeIP)
}

// advertiseURL is conf's advertise-url, else the base URL of a server
// listening on addr ("": not listening), with nodeIP for an unspecified
// host.
func advertiseURL(conf *Config, addr string, tls bool, nodeIP netip.Addr) string {
	if u := conf.AdvertiseURL; u != "" {
		return strings.TrimRight(u, "/")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	if ip, err := netip.ParseAddr(host); host == "" || conf.onAllInterfaces() || (err == nil && ip.IsUnspecified()) {
		if !nodeIP.IsValid() || nodeIP.IsUnspecified() {
			return ""
		}
		host = nodeIP.Unmap().String()
	}
	scheme := "http"
	if tls {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// warnExposure logs a warning for each way the config exposes the API
// beyond what its defaults allow: an endpoint on every interface, and
// basic-auth passwords over plain HTTP.
func (p *Plugin) warnExposure() {
	c := &p.conf
	if c.onAllInterfaces() {
		p.Log.Warn("REST endpoint listens on all interfaces: whoever reaches this node can call the API; "+
			"prefer 127.0.0.1 or one node address, with TLS and client certificates or basic auth",
			"endpoint", c.Endpoint, "tls", c.TLS(), "client-certs", len(c.ClientCertFiles) > 0,
			"basic-auth", len(c.ClientBasicAuth) > 0)
	}
	if len(c.ClientBasicAuth) > 0 && !c.TLS() {
		p.Log.Warn("basic auth over plain HTTP: user names and passwords cross the network in clear text; "+
			"set server-cert-file and server-key-file", "endpoint", c.Endpoint)
	}
}
