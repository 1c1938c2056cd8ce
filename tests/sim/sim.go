package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/contiv-ipam/agent/plugins/contivconf"
)

// Config says what to simulate.
type Config struct {
	// Dir holds the etcd members' data and every node's bolt file.
	Dir string
	// Node tunes every node's agent.
	Node NodeOptions
	// Log receives the agents' and the harness's warnings and errors
	// (nil: discarded).
	Log io.Writer
	// Progress receives a line every 10 s while WaitReady waits (nil:
	// none).
	Progress io.Writer
	// MarkerInterval is the mirror marker's heartbeat (default 10s, the
	// ksr.conf default).
	MarkerInterval time.Duration
	// Seed seeds the choices of nodes and pods (0: 1).
	Seed uint64
	// StartRate spreads the start of many nodes: at most this many agents
	// start per second (0: all at once).
	StartRate float64
	// RestartDelay is how long after its loop stopped by a fatal error a
	// node is restarted by WaitReady, on its bolt file under its name, as
	// Kubernetes restarts an agent whose liveness fails (default 10s,
	// kubelet's first back-off; negative: never).
	RestartDelay time.Duration
}

// Sim is a 3-member etcd cluster, the simulated contiv-ksr and the
// simulated nodes. Its methods are called from one goroutine (the
// scenario's); the nodes' probes reach it only through podChange, which
// takes mu.
type Sim struct {
	Etcd *Etcd
	KSR  *KSR

	cfg  Config
	conf contivconf.Config
	log  *slog.Logger
	rng  *rand.Rand

	mu      sync.Mutex
	live    []*Node                  // started and not stopped
	all     []*Node                  // every node started
	pending map[string]*pendingWrite // by relative key: writes not seen yet
}

// pendingWrite is a pod write whose KubeStateChange the writer awaits.
type pendingWrite struct {
	node *Node
	seen chan time.Time // when the node handled it, sent once
}

// Start raises RLIMIT_NOFILE to its hard limit, starts the etcd cluster
// in cfg.Dir and the simulated contiv-ksr; no node runs yet.
func Start(ctx context.Context, cfg Config) (*Sim, error) {
	if cfg.MarkerInterval == 0 {
		cfg.MarkerInterval = 10 * time.Second
	}
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	if cfg.RestartDelay == 0 {
		cfg.RestartDelay = 10 * time.Second
	}
	var w io.Writer = io.Discard
	if cfg.Log != nil {
		w = cfg.Log
	}
	s := &Sim{cfg: cfg, log: slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn})),
		rng: rand.New(rand.NewPCG(cfg.Seed, 2)), pending: make(map[string]*pendingWrite)}
	var err error
	if s.conf, err = contivconf.DecodeConfig([]byte(ContivConf), "sim contiv.conf"); err != nil {
		return nil, err
	}
	if _, err := RaiseFileLimit(); err != nil {
		return nil, err
	}
	if s.Etcd, err = StartEtcd(ctx, filepath.Join(cfg.Dir, "etcd"), 3); err != nil {
		return nil, err
	}
	cli, err := s.Etcd.Client()
	if err == nil {
		s.KSR, err = newKSR(ctx, cli, cfg.MarkerInterval)
		if err != nil {
			_ = cli.Close()
		}
	}
	if err != nil {
		s.Etcd.Stop()
		return nil, err
	}
	return s, nil
}

// RaiseFileLimit sets RLIMIT_NOFILE's soft limit to its hard limit (every
// node holds a connection to each etcd member and its bolt file) and
// returns it.
func RaiseFileLimit() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("raise RLIMIT_NOFILE to %d: %w", lim.Max, err)
	}
	return lim.Cur, nil
}

// Close stops every node, the simulated contiv-ksr and the etcd
// members.
func (s *Sim) Close() error {
	s.mu.Lock()
	live := slices.Clone(s.live)
	s.live = nil
	s.mu.Unlock()
	err := stopAll(live, 64)
	s.KSR.Close()
	err = errors.Join(err, s.KSR.cli.Close())
	s.Etcd.Stop()
	return err
}

// Live is a copy of the list of running nodes.
func (s *Sim) Live() []*Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.live)
}

// nodeName names the i-th node started.
func nodeName(i int) string { return fmt.Sprintf("node-%05d", i) }

// AddNodes writes count new Nodes into etcd (as contiv-ksr mirrors them,
// par writes at a time) and then starts their agents all at once; it
// returns once every Start returned (the nodes' first resyncs go on in
// the background). Nodes that failed to start are not added and their
// errors are joined.
func (s *Sim) AddNodes(ctx context.Context, count, par int) ([]*Node, error) {
	s.mu.Lock()
	first := len(s.all)
	s.mu.Unlock()
	if err := s.putNodes(ctx, first, count, par); err != nil {
		return nil, err
	}
	return s.startNodes(first, count)
}

// putNodes writes the Nodes first .. first+count-1.
func (s *Sim) putNodes(ctx context.Context, first, count, par int) error {
	sem := make(chan struct{}, max(par, 1))
	errs := make([]error, count)
	var wg sync.WaitGroup
	for i := 0; i < count; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = s.KSR.PutNode(ctx, nodeName(first+i), NodeIP(first+i))
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// startNodes starts the agents of the nodes first .. first+count-1 at
// once.
func (s *Sim) startNodes(first, count int) ([]*Node, error) {
	out := make([]*Node, count)
	errs := make([]error, count)
	var wg sync.WaitGroup
	var pace *time.Ticker
	if s.cfg.StartRate > 0 && count > 1 {
		pace = time.NewTicker(time.Duration(float64(time.Second) / s.cfg.StartRate))
		defer pace.Stop()
	}
	for i := 0; i < count; i++ {
		if pace != nil && i > 0 {
			<-pace.C
		}
		idx := first + i
		name := nodeName(idx)
		dir := filepath.Join(s.cfg.Dir, "nodes", name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		eps := s.endpointsOf(idx)
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = startNode(name, idx, dir, eps, s.cfg.Node, s.log, s.conf, s, time.Time{})
		}()
	}
	wg.Wait()
	var started []*Node
	for _, n := range out {
		if n != nil {
			started = append(started, n)
		}
	}
	s.mu.Lock()
	s.live = append(s.live, started...)
	s.all = append(s.all, started...)
	s.mu.Unlock()
	return started, errors.Join(errs...)
}

// endpointsOf are the members node idx's client lists: every member, or
// NodeOptions.EndpointsPerNode of them from a place that turns with idx.
func (s *Sim) endpointsOf(idx int) []string {
	eps := s.Etcd.Endpoints()
	k := s.cfg.Node.EndpointsPerNode
	if k <= 0 || k >= len(eps) {
		return eps
	}
	out := make([]string, 0, k)
	for j := 0; j < k; j++ {
		out = append(out, eps[(idx+j)%len(eps)])
	}
	return out
}

// StopNode stops a node's agent and has contiv-ksr delete its Node and
// pods (the node left the cluster).
func (s *Sim) StopNode(ctx context.Context, n *Node) error {
	s.mu.Lock()
	s.live = slices.DeleteFunc(s.live, func(o *Node) bool { return o == n })
	s.mu.Unlock()
	return errors.Join(n.Stop(), s.KSR.DeleteNode(ctx, n.Name))
}

// WaitReady waits until every node of nodes is ready, polling every
// 50 ms, and returns how long that took from the call and how many
// restarts it made: a node whose loop stopped by a fatal error is
// restarted Config.RestartDelay later, in a goroutine of its own (as
// Kubernetes restarts every such agent at once), and its entry in nodes
// is replaced; one whose restart failed is restarted again. It fails
// when ctx ends first, naming how many are not
// ready and the first fatal error seen, once the restarts under way
// have ended.
func (s *Sim) WaitReady(ctx context.Context, nodes []*Node) (time.Duration, int, error) {
	type restarted struct {
		i   int
		n   *Node
		err error
	}
	start := time.Now()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	results := make(chan restarted)
	inFlight := make(map[int]bool)
	restarts := 0
	var firstFatal, restartErr error
	lastNote := start
	for {
		missing, dead := 0, 0
		for i, n := range nodes {
			if n.Ready() {
				n.probe.checkReady()
				continue
			}
			missing++
			at, err := n.Fatal()
			if err == nil {
				continue
			}
			dead++
			if firstFatal == nil {
				firstFatal = fmt.Errorf("%s: %w", n.Name, err)
			}
			if inFlight[i] || ctx.Err() != nil || s.cfg.RestartDelay < 0 || time.Since(at) < s.cfg.RestartDelay {
				continue
			}
			inFlight[i] = true
			go func() {
				nn, err := s.restart(n)
				results <- restarted{i, nn, err}
			}()
		}
		if missing == 0 && len(inFlight) == 0 {
			// A restart that failed was tried again: every node is ready.
			return time.Since(start), restarts, nil
		}
		if s.cfg.Progress != nil && time.Since(lastNote) >= 10*time.Second {
			lastNote = time.Now()
			_, _ = fmt.Fprintf(s.cfg.Progress, "    %s ready %d of %d; loops dead now %d, restarting %d, restarts %d\n",
				lastNote.Format("15:04:05"), len(nodes)-missing, len(nodes), dead, len(inFlight), restarts)
		}
		done := ctx.Done()
		if len(inFlight) > 0 {
			done = nil // the restarts under way end first
		} else if ctx.Err() != nil {
			return time.Since(start), restarts, fmt.Errorf("%d of %d nodes not ready (%d restarts; first fatal error: %v): %w",
				missing, len(nodes), restarts, errors.Join(firstFatal, restartErr), ctx.Err())
		}
		select {
		case r := <-results:
			delete(inFlight, r.i)
			if r.err != nil {
				restartErr = errors.Join(restartErr, fmt.Errorf("restart %s: %w", nodes[r.i].Name, r.err))
				continue
			}
			nodes[r.i] = r.n
			restarts++
		case <-done:
		case <-t.C:
		}
	}
}

// restart stops a node whose loop died and starts its agent again under
// its name on its bolt file; the new Node replaces it in the lists.
func (s *Sim) restart(n *Node) (*Node, error) {
	_ = n.Stop() // the loop is dead: its Close reports that, nothing to act on
	nn, err := startNode(n.Name, n.Index, n.dir, s.endpointsOf(n.Index), s.cfg.Node, s.log, s.conf, s, n.started)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	for i, o := range s.live {
		if o == n {
			s.live[i] = nn
		}
	}
	for i, o := range s.all {
		if o == n {
			s.all[i] = nn
		}
	}
	s.mu.Unlock()
	return nn, nil
}

// expect registers a write of the pod key that node n should see; the
// returned channel gets the time n's loop handled its KubeStateChange.
func (s *Sim) expect(n *Node, relKey string) <-chan time.Time {
	w := &pendingWrite{node: n, seen: make(chan time.Time, 1)}
	s.mu.Lock()
	s.pending[relKey] = w
	s.mu.Unlock()
	return w.seen
}

// forget drops a pending write never seen.
func (s *Sim) forget(relKey string) {
	s.mu.Lock()
	delete(s.pending, relKey)
	s.mu.Unlock()
}

// podChange is called by every node's probe (observer).
func (s *Sim) podChange(n *Node, key string, at time.Time) {
	s.mu.Lock()
	w, ok := s.pending[key]
	if ok && w.node == n {
		delete(s.pending, key)
	}
	s.mu.Unlock()
	if ok && w.node == n {
		w.seen <- at
	}
}

// pick returns a random element of a non-empty list.
func pick[T any](s *Sim, list []T) T { return list[s.rng.IntN(len(list))] }
