package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/contiv-ipam/agent/infra"
	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/health"
	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd/internal/embedded"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd/internal/etcdlog"
)

// Plugin is the etcd store plugin: a kvdb.Store backed by an etcd client,
// connected to the configured endpoints or to an embedded server.
type Plugin struct {
	Deps

	base *Config                     // from UseConf; nil means DefaultConfig()
	env  func(string) (string, bool) // env lookup for ETCD_ENDPOINTS

	cfg    Config           // effective configuration, set by Init
	server *embedded.Server // the embedded server, if any
	cli    *clientv3.Client
	conn   connection
	// ident is the identity of the store behind the endpoints; replaced
	// queues the replacements found for the monitor to report.
	ident    identity
	replaced chan kvdb.StoreReplaced

	life     context.Context // cancelled by Close
	stop     context.CancelFunc
	mu       sync.Mutex // guards closing and wg.Add
	closing  bool
	closed   atomic.Bool
	wg       sync.WaitGroup
	probeKey string

	loaded config.Preloaded[Config] // by LoadConfig (loadconfig.go), for Init
}

// Deps are the plugin's dependencies.
type Deps struct {
	infra.PluginDeps
	// StatusCheck receives the connection health; optional (nil: none).
	StatusCheck health.Reporter
}

var (
	_ infra.Plugin   = (*Plugin)(nil)
	_ infra.PostInit = (*Plugin)(nil)
	_ kvdb.Store     = (*Plugin)(nil)
)

// probeKeyName is read (never written) by the connection probe.
const probeKeyName = "/probe-etcd-connection"

// replacedQueue is how many replacements of the store wait for the monitor
// to report them.
const replacedQueue = 4

// Init loads etcd.conf, starts the embedded server when configured (or
// when there are no endpoints), creates the client and probes the
// connection. Unreachable etcd fails Init unless allow-delayed-start is set.
func (p *Plugin) Init() error {
	cfg, err := p.initConfig()
	if err != nil {
		return err
	}
	p.cfg, p.probeKey = cfg, probeKeyName
	p.replaced = make(chan kvdb.StoreReplaced, replacedQueue)
	p.life, p.stop = context.WithCancel(context.Background())
	if cfg.Embedded {
		if err := p.startEmbedded(); err != nil {
			return err
		}
	}
	cli, err := p.newClient()
	if err != nil {
		return errors.Join(err, p.Close())
	}
	p.cli = cli
	p.logStoreInUse()
	err = p.probe(p.life)
	_, queued, _ := p.conn.update(err)
	if err == nil {
		p.Log.Info("connected", "endpoints", p.cfg.Endpoints)
		for _, fn := range queued { // registered before Init, if any
			p.runOnConnect(fn)
		}
		return nil
	}
	if !cfg.AllowDelayedStart {
		return errors.Join(fmt.Errorf("cannot reach etcd endpoints %q within dial-timeout %s: %w",
			p.cfg.Endpoints, cfg.DialTimeout, err), p.Close())
	}
	p.Log.Warn("etcd unreachable; allow-delayed-start is set, retrying in the background",
		"endpoints", p.cfg.Endpoints, "reconnect-interval", cfg.ReconnectInterval, "err", err)
	return nil
}

// loadConfig decodes etcd.conf over the base config, normalises and
// validates it.
func (p *Plugin) loadConfig() (Config, error) {
	cfg := DefaultConfig()
	if p.base != nil {
		cfg = *p.base
	}
	if _, err := p.Cfg.LoadValue(&cfg); err != nil {
		return Config{}, err
	}
	cfg.Normalize(p.env)
	if err := cfg.Validate(); err != nil {
		return Config{}, fmt.Errorf("config %s: %w", config.SourceName(p.Cfg), err)
	}
	if cfg.AutoCompact > 0 && cfg.AutoCompact < time.Hour {
		p.Log.Warn("auto-compact below 1h: watches that fall behind will break more often", "auto-compact", cfg.AutoCompact)
	}
	return cfg, nil
}

// startEmbedded runs the in-process server and points the endpoints at it.
func (p *Plugin) startEmbedded() error {
	srv, err := embedded.Start(embedded.Config{
		Dir:       p.cfg.EmbeddedDataDir,
		ClientURL: p.cfg.EmbeddedClientURL,
		PeerURL:   p.cfg.EmbeddedPeerURL,
		Log:       p.Log,
	})
	if err != nil {
		return err
	}
	p.server = srv
	p.cfg.Endpoints = []string{srv.Endpoint()}
	p.Log.Info("embedded etcd server started", "client-url", srv.ClientURL(),
		"peer-url", srv.PeerURL(), "data-dir", p.cfg.EmbeddedDataDir)
	return nil
}

// newClient creates the client; it does not wait for a connection.
func (p *Plugin) newClient() (*clientv3.Client, error) {
	tc, err := p.cfg.tlsConfig()
	if err != nil {
		return nil, err
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   p.cfg.Endpoints,
		DialTimeout: p.cfg.DialTimeout,
		TLS:         tc,
		Logger:      etcdlog.New(p.Log, zapcore.ErrorLevel),
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: p.cfg.ReconnectInterval},
			MinConnectTimeout: p.cfg.DialTimeout,
		})},
	})
	if err != nil {
		return nil, fmt.Errorf("etcd client for endpoints %q: %w", p.cfg.Endpoints, err)
	}
	return cli, nil
}

// AfterInit registers the health probe and starts the connection monitor
// (probes, delayed connection, reconnect callbacks) and auto-compaction.
func (p *Plugin) AfterInit() error {
	if p.StatusCheck != nil {
		p.StatusCheck.Register(p.String(), p.conn.state)
		state, err := p.conn.state()
		p.StatusCheck.ReportStateChange(p.String(), state, err)
	}
	p.goTracked(p.monitor)
	if p.cfg.AutoCompact > 0 {
		p.goTracked(p.autoCompact)
	}
	return nil
}

// goTracked runs fn(life) in a goroutine that Close waits for; after Close
// has begun it runs nothing and returns false.
func (p *Plugin) goTracked(fn func(ctx context.Context)) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing || p.life == nil {
		return false
	}
	p.wg.Go(func() { fn(p.life) })
	return true
}

// Close stops the monitor and the watches, closes the client and stops the
// embedded server. It is safe after a failed Init and when called twice.
func (p *Plugin) Close() error {
	p.mu.Lock()
	already := p.closing
	p.closing = true
	p.mu.Unlock()
	if already {
		return nil
	}
	p.closed.Store(true)
	if p.stop != nil {
		p.stop()
	}
	var err error
	if p.cli != nil {
		if cerr := p.cli.Close(); cerr != nil && !errors.Is(cerr, context.Canceled) {
			err = fmt.Errorf("etcd: close client: %w", cerr)
		}
	}
	p.wg.Wait()
	if p.server != nil {
		p.server.Close()
		p.Log.Info("embedded etcd server stopped")
	}
	return err
}

// Config returns the effective configuration (valid after Init); with an
// embedded server, Endpoints holds its real address.
func (p *Plugin) Config() Config { return p.cfg }

// NewBroker returns a view of the store under prefix.
func (p *Plugin) NewBroker(prefix string) kvdb.Broker { return kvdb.WithPrefix(p, prefix) }
