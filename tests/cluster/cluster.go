package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/contiv-ipam/agent/plugins/ksr"
	"github.com/contiv-ipam/agent/tests/kubeenv"
)

// Time bounds of the processes.
const (
	// startTimeout bounds a start, up to /readiness 200.
	startTimeout = 60 * time.Second
	// StopTimeout bounds a clean stop (SIGINT) before SIGKILL.
	StopTimeout = 20 * time.Second
)

// Bins are the binaries a cluster runs.
type Bins struct {
	Agent string // contiv-agent
	KSR   string // contiv-ksr
	Etcd  string // etcd (the server, of kubeenv.AssetsDir())
}

// BinsIn returns contiv-agent and contiv-ksr of dir (./bin after `make
// build`, or testenv.Binaries().Dir) and the etcd of kubeenv.AssetsDir();
// the error names the file that is missing.
func BinsIn(dir string) (Bins, error) {
	assets, err := kubeenv.AssetsDir()
	if err != nil {
		return Bins{}, err
	}
	b := Bins{Agent: filepath.Join(dir, "contiv-agent"), KSR: filepath.Join(dir, "contiv-ksr"),
		Etcd: filepath.Join(assets, "etcd")}
	for _, p := range []string{b.Agent, b.KSR} {
		if _, err := os.Stat(p); err != nil {
			return Bins{}, fmt.Errorf("cluster: %w (run `make build`)", err)
		}
	}
	return b, nil
}

// Cluster is an etcd with the contiv-ksr replicas and contiv-agents on
// it, every process a child of this one, every file under Dir.
type Cluster struct {
	// Dir holds one directory per process.
	Dir string
	// Bins are the binaries it runs.
	Bins Bins
	// Kubeconfig reaches the API server that contiv-ksr mirrors.
	Kubeconfig string
	// Etcd is the Contiv etcd.
	Etcd *Etcd
	// KSRs and Agents are the processes added, in order.
	KSRs   []*KSR
	Agents []*Agent
}

// Start starts the Contiv etcd in dir/etcd; contiv-ksr replicas and
// agents are added with AddKSR and AddAgent.
func Start(ctx context.Context, dir string, bins Bins, kubeconfig string) (*Cluster, error) {
	e, err := startEtcd(ctx, bins.Etcd, filepath.Join(dir, "etcd"))
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	return &Cluster{Dir: dir, Bins: bins, Kubeconfig: kubeconfig, Etcd: e}, nil
}

// AddKSR starts a contiv-ksr replica (ksr-1, ksr-2, ...) with ksr.conf
// conf (zero fields: the defaults) on the cluster's etcd and API server.
func (c *Cluster) AddKSR(ctx context.Context, conf ksr.Config) (*KSR, error) {
	name := fmt.Sprintf("ksr-%d", len(c.KSRs)+1)
	k, err := startKSR(ctx, c.Bins.KSR, filepath.Join(c.Dir, name), name, c.Etcd.Endpoint, c.Kubeconfig, conf)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	c.KSRs = append(c.KSRs, k)
	return k, nil
}

// AddAgent starts a contiv-agent for node o.Node in dir/agent-<node>.
func (c *Cluster) AddAgent(ctx context.Context, o AgentOptions) (*Agent, error) {
	if o.Node == "" {
		return nil, errors.New("cluster: AddAgent needs a node name")
	}
	a, err := startAgent(ctx, c.Bins.Agent, filepath.Join(c.Dir, "agent-"+o.Node), c.Etcd.Endpoint, o)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	c.Agents = append(c.Agents, a)
	return a, nil
}

// Procs are every process started, in start order.
func (c *Cluster) Procs() []*Proc {
	out := []*Proc{c.Etcd.Proc}
	for _, k := range c.KSRs {
		out = append(out, k.Proc)
	}
	for _, a := range c.Agents {
		out = append(out, a.Proc)
	}
	return out
}

// Stop stops the running processes cleanly in reverse start order
// (agents, replicas, etcd: each SIGINT, SIGKILL after StopTimeout) and
// joins their errors.
func (c *Cluster) Stop() error {
	var errs []error
	for _, p := range slices.Backward(c.Procs()) {
		if p.Running() {
			errs = append(errs, p.Stop(StopTimeout))
		}
	}
	return errors.Join(errs...)
}

// Kill kills every process (SIGKILL to each process group) and waits
// until each is reaped.
func (c *Cluster) Kill() error {
	var errs []error
	for _, p := range c.Procs() {
		errs = append(errs, p.Kill())
	}
	return errors.Join(errs...)
}

// joinKill kills p after a failed start and returns err with the kill's
// error.
func joinKill(err error, p *Proc) error { return errors.Join(err, p.Kill()) }
