//go:build !contiv_noembed

package embedded

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap/zapcore"

	"github.com/contiv-ipam/agent/infra/kvdb/etcd/internal/etcdlog"
)

// memberName is the name of the only member.
const memberName = "contiv-agent"

// Server is a running embedded etcd.
type Server struct {
	etcd      *embed.Etcd
	clientURL string
	peerURL   string
	closing   *atomic.Bool // demotes etcd's shutdown noise to debug
}

// Start runs the server and waits until it serves clients.
func Start(cfg Config) (*Server, error) {
	closing := new(atomic.Bool)
	ec, err := embedConfig(cfg, closing)
	if err != nil {
		return nil, err
	}
	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("start embedded etcd in %q: %w", cfg.Dir, err)
	}
	timeout := cfg.StartTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		closing.Store(true)
		e.Close()
		return nil, fmt.Errorf("embedded etcd in %q failed while starting: %w", cfg.Dir, err)
	case <-time.After(timeout):
		closing.Store(true)
		e.Close()
		return nil, fmt.Errorf("embedded etcd in %q not ready after %s", cfg.Dir, timeout)
	}
	return &Server{
		etcd:      e,
		clientURL: "http://" + e.Clients[0].Addr().String(),
		peerURL:   "http://" + e.Peers[0].Listener.Addr().String(),
		closing:   closing,
	}, nil
}

// embedConfig turns cfg into etcd's configuration.
func embedConfig(cfg Config, closing *atomic.Bool) (*embed.Config, error) {
	if cfg.Dir == "" {
		return nil, errors.New("embedded etcd: empty data directory")
	}
	var urls [2]*url.URL
	for i, raw := range []string{cfg.ClientURL, cfg.PeerURL} {
		if err := CheckLoopback(raw); err != nil {
			return nil, fmt.Errorf("embedded etcd: %w", err)
		}
		urls[i], _ = url.Parse(raw)
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ec := embed.NewConfig()
	ec.Name = memberName
	ec.Dir = cfg.Dir
	ec.ListenClientUrls = []url.URL{*urls[0]}
	ec.AdvertiseClientUrls = []url.URL{*urls[0]}
	ec.ListenPeerUrls = []url.URL{*urls[1]}
	ec.AdvertisePeerUrls = []url.URL{*urls[1]}
	ec.InitialCluster = memberName + "=" + urls[1].String()
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(etcdlog.NewMutable(log, zapcore.WarnLevel, closing))
	// NewConfig leaves this at 0, which would log every request as slow.
	ec.WarningUnaryRequestDuration = embed.DefaultWarningUnaryRequestDuration
	ec.UnsafeNoFsync = cfg.UnsafeNoFsync
	// One member on loopback: no peer can be slow, and a restarted member
	// waits one election timeout before it leads, so keep it short
	// (defaults 100ms/1000ms are for members across a network).
	ec.TickMs = 50
	ec.ElectionMs = 250
	return ec, nil
}

// ClientURL is the URL clients connect to, with the real port.
func (s *Server) ClientURL() string { return s.clientURL }

// PeerURL is the peer URL, with the real port.
func (s *Server) PeerURL() string { return s.peerURL }

// Endpoint is the client address as host:port.
func (s *Server) Endpoint() string { return s.etcd.Clients[0].Addr().String() }

// Close stops the server and waits until it has stopped. The errors etcd
// logs about closed listeners while stopping are logged at debug level.
func (s *Server) Close() {
	s.closing.Store(true)
	s.etcd.Close()
	<-s.etcd.Server.StopNotify()
}
