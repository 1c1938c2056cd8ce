package ksr

import (
	"github.com/contiv-ipam/agent/plugins/nodeipam"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// Name is the plugin's name: its logger, its config file (ksr.conf) and
// its health entry.
const Name = "ksr"

// Option changes the plugin NewPlugin builds.
type Option func(*Plugin)

// NewPlugin returns the reflector plugin; options are applied in order,
// then the missing logger and config accessor are filled.
func NewPlugin(opts ...Option) *Plugin {
	p := &Plugin{
		clock:       clock.RealClock{},
		identity:    []byte(hostIdentity()),
		dirty:       newDirtySet(),
		absence:     newAbsence(),
		status:      &statusBook{},
		metrics:     newKSRMetrics(),
		ipamMetrics: nodeipam.NewMetrics(),
		poolMetrics: nodeipam.NewPoolBlockMetrics(),
		resyncNow:   make(chan struct{}, 1),
		nodeGone:    make(chan struct{}, 1),
		env:         lookupEnv,
	}
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

// UseConf replaces ksr.conf.
func UseConf(c Config) Option { return func(p *Plugin) { p.fixedConf = &c } }

// UseClient makes the plugin use client instead of resolving a kubeconfig
// (tests: a fake clientset, or envtest's).
func UseClient(client kubernetes.Interface) Option { return func(p *Plugin) { p.client = client } }

// UseClock replaces the real clock (tests: k8s.io/utils/clock/testing).
func UseClock(c clock.WithTicker) Option { return func(p *Plugin) { p.clock = c } }

// UseIdentity names this replica in the election (default host/pid).
func UseIdentity(id string) Option { return func(p *Plugin) { p.identity = []byte(id) } }

// UseEnv replaces the environment lookup of -kubeconfig and the in-cluster
// check (tests).
func UseEnv(env func(string) (string, bool)) Option { return func(p *Plugin) { p.env = env } }
