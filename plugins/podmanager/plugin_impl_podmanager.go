package podmanager

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/contiv-ipam/agent/infra"
	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/health"
	"github.com/contiv-ipam/agent/infra/metrics"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/podmanager/cni"
)

// gracefulStopTimeout bounds how long Close lets the calls in flight
// finish before it cuts their connections.
const gracefulStopTimeout = 2 * time.Second

// Deps are the plugin's dependencies.
type Deps struct {
	infra.PluginDeps
	// EventLoop receives the blocking AddPod, DeletePod and GCPods events
	// (the controller, through a controller.LoopRef); required.
	EventLoop api.EventLoop
	// IPAM answers CHECK and STATUS; without it both fail (CHECK with
	// CodeInternal, STATUS with CodeNotAvailable).
	IPAM IPAM
	// Metrics registers the plugin's metrics; optional.
	Metrics metrics.API
	// StatusCheck hears the server's state; optional.
	StatusCheck health.Reporter
}

// Plugin is podmanager: the CNI gRPC server on a unix socket and the
// record of the pods connected on this node. Build it with NewPlugin.
type Plugin struct {
	Deps

	fixedConf *Config
	loaded    config.Preloaded[Config]

	// Set by Init, read-only afterwards.
	cfg     Config
	metrics *podmanagerMetrics
	life    context.Context // ends when Close begins: calls in flight give up
	endLife context.CancelFunc

	pods *podTable // owned by the event loop, see podTable

	// runtime lists the CRI runtime's sandboxes (nil without criSocket);
	// set by Init. runtimeDone is closed when runtimeLoop returned.
	runtime     Runtime
	runtimeDone chan struct{}
	// runtimeMu guards whether the last list answered (for the logs).
	runtimeMu    sync.Mutex
	runtimeKnown bool
	runtimeWasUp bool

	// mu guards the server's start and stop (AfterInit, Close).
	mu     sync.Mutex
	grpc   *grpc.Server
	sock   *socket
	served chan struct{} // closed when Serve returned
	closed bool
}

var (
	_ infra.Plugin     = (*Plugin)(nil)
	_ infra.PostInit   = (*Plugin)(nil)
	_ api.EventHandler = (*Plugin)(nil)
	_ API              = (*Plugin)(nil)
)

// Init loads podmanager.conf and registers the metrics and health entry.
// Nothing is created on disk yet.
func (p *Plugin) Init() error {
	if p.EventLoop == nil {
		return errors.New("podmanager needs EventLoop (the controller)")
	}
	cfg, err := p.loadConfig()
	if err != nil {
		return err
	}
	p.cfg = cfg
	p.life, p.endLife = context.WithCancel(context.Background())
	p.metrics = newPodmanagerMetrics()
	if p.Metrics != nil {
		if err := p.Metrics.Register(p.metrics); err != nil {
			return fmt.Errorf("registering podmanager metrics: %w", err)
		}
	}
	if err := p.startRuntime(); err != nil {
		return err
	}
	if p.StatusCheck != nil {
		p.StatusCheck.Register(p.String(), nil) // init until the socket serves
	}
	if p.IPAM == nil {
		p.Log.Warn("no IPAM: CNI CHECK and STATUS will fail")
	}
	return nil
}

// AfterInit creates the socket and starts serving the CNI API. Calls
// pushed before the controller's first resync wait for it.
func (p *Plugin) AfterInit() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.grpc != nil {
		return nil
	}
	p.adoptRuntimePods()
	sock, err := listenSocket(p.cfg.SocketPath, p.Log)
	if err != nil {
		p.report(health.Error, err)
		return err
	}
	srv := grpc.NewServer(
		grpc.ConnectionTimeout(p.cfg.HandshakeTimeout),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: p.cfg.IdleTimeout}),
	)
	cni.RegisterRemoteCNIServer(srv, &server{p: p})
	p.grpc, p.sock, p.served = srv, sock, make(chan struct{})
	go p.serve(srv, newLimitListener(sock.ln, p.cfg.MaxConnections, p.metrics), sock)
	if p.runtime != nil {
		p.runtimeDone = make(chan struct{})
		go p.runtimeLoop(p.runtimeDone)
	}
	p.report(health.OK, nil)
	p.Log.Info("serving the CNI API", "socket", p.cfg.SocketPath, "request-timeout", p.cfg.RequestTimeout,
		"max-connections", p.cfg.MaxConnections, "handshake-timeout", p.cfg.HandshakeTimeout, "idle-timeout", p.cfg.IdleTimeout)
	return nil
}

// serve runs the gRPC server on ln (sock's listener, bounded) until Close;
// an early end turns health red.
func (p *Plugin) serve(srv *grpc.Server, ln *limitListener, sock *socket) {
	defer close(p.served)
	err := srv.Serve(ln)
	if err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		p.Log.Error("the CNI API stopped serving", "socket", sock.path, "error", err)
		p.report(health.Error, fmt.Errorf("CNI socket %q: %w", sock.path, err))
	}
}

// Close makes the calls in flight give up (they answer "try again later"),
// stops the server gracefully within gracefulStopTimeout, then cuts what
// is left, and removes the socket file if it is still the one it created.
// Safe after a failed Init and twice.
func (p *Plugin) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	if p.endLife != nil {
		p.endLife()
	}
	if p.runtimeDone != nil {
		<-p.runtimeDone
	}
	if c, ok := p.runtime.(*criRuntime); ok {
		_ = c.close()
	}
	if p.grpc == nil {
		return nil
	}
	stopped := make(chan struct{})
	go func() {
		p.grpc.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(gracefulStopTimeout):
		p.Log.Warn("CNI calls still in flight after the graceful stop timeout; cutting them", "timeout", gracefulStopTimeout)
		p.grpc.Stop()
		<-stopped
	}
	<-p.served
	p.report(health.Error, errors.New("closed"))
	return p.sock.remove()
}

// report passes the server's state to StatusCheck, if wired.
func (p *Plugin) report(s health.State, err error) {
	if p.StatusCheck != nil {
		p.StatusCheck.ReportStateChange(p.String(), s, err)
	}
}

// SocketPath is the socket the plugin serves (its config's socketPath).
func (p *Plugin) SocketPath() string { return p.cfg.SocketPath }

// GetLocalPods returns a copy of the pods connected on this node.
func (p *Plugin) GetLocalPods() LocalPods { return p.pods.snapshot() }

// HandlesEvent is true for AddPod, DeletePod and GCPods.
func (p *Plugin) HandlesEvent(ev api.Event) bool {
	switch ev.(type) {
	case *AddPod, *DeletePod, *GCPods:
		return true
	}
	return false
}

// Resync keeps the local pods: there is no container runtime to list
// them from (it is not called: HandlesEvent is false for resyncs).
func (p *Plugin) Resync(api.Event, api.KubeStateData, int, api.ResyncOperations) error { return nil }

// Update records (AddPod) or forgets (DeletePod, GCPods) local pods.
func (p *Plugin) Update(ev api.Event, _ api.UpdateOperations) (string, error) {
	switch e := ev.(type) {
	case *AddPod:
		if err := p.pods.addPod(e); err != nil {
			return "", err
		}
		return fmt.Sprintf("pod %s recorded with %s", e.Pod, e.Key), nil
	case *DeletePod:
		p.pods.deletePod(e.Pod, e.Key)
		return fmt.Sprintf("pod %s: %s forgotten", e.Pod, e.Key), nil
	case *GCPods:
		p.pods.gc(e.Network, e.Valid)
		return fmt.Sprintf("attachments of network %q not among the %d valid forgotten", e.Network, len(e.Valid)), nil
	}
	return "", nil
}

// Revert undoes what Update recorded for an AddPod that a later handler
// failed (a repeated Add of a recorded key recorded nothing, and reverts
// nothing).
func (p *Plugin) Revert(ev api.Event) error {
	if e, ok := ev.(*AddPod); ok {
		p.pods.revertAdd(e)
	}
	return nil
}
