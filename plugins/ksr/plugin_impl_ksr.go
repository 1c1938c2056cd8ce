package ksr

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	kuberest "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/contiv-ipam/agent/infra"
	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/health"
	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/infra/metrics"
	"github.com/contiv-ipam/agent/infra/rest"
	"github.com/contiv-ipam/agent/plugins/ksr/model/node"
	"github.com/contiv-ipam/agent/plugins/nodeipam"
)

// Deps are the plugin's dependencies.
type Deps struct {
	infra.PluginDeps
	// DB is etcd (the etcd plugin), addressed with full keys: the mirror
	// is written under codec.KSRPrefix; required.
	DB kvdb.Broker
	// Election elects the one replica that writes (the etcd plugin);
	// required.
	Election kvdb.ElectionStore
	// HTTP serves StatusPath and ResyncPath; optional.
	HTTP rest.HTTPHandlers
	// Metrics registers the plugin's metrics; optional.
	Metrics metrics.API
	// StatusCheck hears the plugin's health: OK once the informers have
	// synced, Error while etcd writes fail; optional.
	StatusCheck health.Reporter
}

// Plugin is the Kubernetes state reflector. Build it with NewPlugin.
type Plugin struct {
	Deps

	fixedConf *Config                        // from UseConf
	client    kubernetes.Interface           // from UseClient, else built by Init
	clock     clock.WithTicker               // UseClock
	identity  []byte                         // UseIdentity
	env       func(string) (string, bool)    // UseEnv
	flags     *flag.FlagSet                  // from RegisterFlags
	loaded    config.Preloaded[loadedConfig] // by LoadConfig

	// Set by Init, read-only afterwards.
	cfg      Config
	factory  informers.SharedInformerFactory
	res      []*resource
	mirror   *mirror   // the loop goroutine only
	releaser *releaser // the loop goroutine only

	// Shared, each with its own lock or channel semantics.
	dirty       *dirtySet         // informer handlers add, the loop takes
	absence     *absence          // node handlers write, the loop reads
	status      *statusBook       // the loop writes, REST reads
	metrics     *ksrMetrics       // Prometheus types are safe for concurrent use
	ipamMetrics *nodeipam.Metrics // the node CIDR allocators of every leadership
	ipam        ipamBook          // the loop sets the running allocator, REST reads it
	resyncNow   chan struct{}     // REST asks the loop for a resync (capacity 1)
	nodeGone    chan struct{}     // node handlers wake the loop (capacity 1)

	// poolMetrics count for the pool block servers of every leadership.
	poolMetrics *nodeipam.PoolBlockMetrics

	// statuses follows the agents' status records for the cluster page
	// (its goroutine writes, the page reads); set by Init.
	statuses *statusWatch
	// page is what the cluster page's handlers keep between requests.
	page clusterPageState

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

var (
	_ infra.Plugin         = (*Plugin)(nil)
	_ infra.PostInit       = (*Plugin)(nil)
	_ infra.ConfigLoader   = (*Plugin)(nil)
	_ config.FlagRegistrar = (*Plugin)(nil)
)

func lookupEnv(name string) (string, bool) { return os.LookupEnv(name) }

// RegisterFlags adds -kubeconfig (env KUBECONFIG) and the config flags.
func (p *Plugin) RegisterFlags(fs *flag.FlagSet) {
	if fs.Lookup(KubeconfigFlag) == nil {
		fs.String(KubeconfigFlag, "", "kubeconfig file of the API server to mirror (env KUBECONFIG; "+
			"unset: the kubeconfig key of ksr.conf, else the in-cluster service account)")
	}
	p.flags = fs
	p.Deps.RegisterFlags(fs)
}

// LoadConfig decodes and validates ksr.conf and resolves the kubeconfig
// (reading it, connecting nowhere) before any plugin's Init, so that a bad
// file stops contiv-ksr before anything starts.
func (p *Plugin) LoadConfig() error { return p.loaded.Load(p.loadConfig) }

// loadConfig is ksr.conf and, unless UseClient gave a client, the
// resolved kubeconfig.
func (p *Plugin) loadConfig() (loadedConfig, error) {
	cfg, err := p.decodeConfig()
	if err != nil || p.client != nil {
		return loadedConfig{Config: cfg}, err
	}
	rc, origin, err := p.kubeConfig(cfg)
	if err != nil {
		return loadedConfig{}, fmt.Errorf("ksr: %w", err)
	}
	return loadedConfig{Config: cfg, rest: rc, origin: origin}, nil
}

// loadedConfig is what LoadConfig found.
type loadedConfig struct {
	Config
	rest   *kuberest.Config // nil with UseClient
	origin string           // where the kubeconfig came from
}

// Init loads the config, builds the client and the informers and
// registers the REST handlers and metrics. Nothing runs until AfterInit.
func (p *Plugin) Init() error {
	loaded, err := p.loaded.Get(p.loadConfig)
	if err != nil {
		return err
	}
	p.cfg = loaded.Config
	if p.DB == nil || p.Election == nil {
		return errors.New("ksr: DB and Election (the etcd plugin) are required")
	}
	if err := p.initClient(loaded); err != nil {
		return err
	}
	p.factory = informers.NewSharedInformerFactory(p.client, 0)
	p.res = newResources(p.factory, p.cfg.PodLayout)
	for i, r := range p.res {
		if _, err := r.informer.AddEventHandler(p.handler(i)); err != nil {
			return fmt.Errorf("ksr: %s informer: %w", r.keyword, err)
		}
	}
	p.mirror = &mirror{db: p.DB, res: p.res, metrics: p.metrics, log: p.Log}
	p.statuses = newStatusWatch(p.DB, p.Log)
	p.releaser = &releaser{db: p.DB, nodes: p.res[0].informer.GetStore(), absence: p.absence,
		grace: p.cfg.NodeIDGracePeriod, clock: p.clock, metrics: p.metrics, log: p.Log}
	if p.Metrics != nil {
		if err := p.Metrics.Register(p.metrics); err != nil {
			return fmt.Errorf("ksr: register metrics: %w", err)
		}
		if err := p.Metrics.Register(p.ipamMetrics); err != nil {
			return fmt.Errorf("ksr: register nodeipam metrics: %w", err)
		}
		if err := p.Metrics.Register(p.poolMetrics); err != nil {
			return fmt.Errorf("ksr: register pool block metrics: %w", err)
		}
	}
	p.registerHandlers()
	return nil
}

// initClient builds the clientset unless UseClient gave one.
func (p *Plugin) initClient(loaded loadedConfig) error {
	if p.client != nil {
		return nil
	}
	rc, origin := loaded.rest, loaded.origin
	rc.UserAgent = "contiv-ksr"
	rc.QPS, rc.Burst = float32(loaded.KubeQPS), loaded.KubeBurst
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("ksr: client for %s: %w", rc.Host, err)
	}
	p.client = client
	p.Log.Info("API server", "host", rc.Host, "kubeconfig", origin)
	return nil
}

// handler marks the objects of resource i dirty as the informer sees
// them change; for nodes it also tracks since when a node is gone.
func (p *Plugin) handler(i int) cache.ResourceEventHandler {
	isNode := p.res[i].keyword == node.Keyword
	mark := func(obj any) {
		key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
		if err != nil {
			p.Log.Error("object without a key", "resource", p.res[i].keyword, "err", err)
			return
		}
		p.dirty.add(dirtyKey{res: i, storeKey: key})
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if isNode {
				p.absence.back(objectName(obj))
			}
			mark(obj)
		},
		UpdateFunc: func(_, obj any) { mark(obj) },
		DeleteFunc: func(obj any) {
			if isNode {
				p.absence.gone(objectName(obj), p.clock.Now())
				select {
				case p.nodeGone <- struct{}{}:
				default:
				}
			}
			mark(obj)
		},
	}
}

// objectName is the name of an informer object or tombstone.
func objectName(obj any) string {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		_, name, _ := cache.SplitMetaNamespaceKey(t.Key)
		return name
	}
	if n, ok := obj.(named); ok {
		return n.GetName()
	}
	return ""
}

// AfterInit starts the informers and the loop goroutine.
func (p *Plugin) AfterInit() error {
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	if p.StatusCheck != nil {
		p.StatusCheck.ReportStateChange(p.String(), health.Init, errors.New("informers not synced yet"))
	}
	p.factory.Start(ctx.Done())
	p.wg.Go(func() { p.run(ctx) })
	p.wg.Go(func() { p.statuses.run(ctx) })
	return nil
}

// Close stops the loop (resigning a held lead, so that a standby takes
// over at once) and the informers. It is safe after a failed Init.
func (p *Plugin) Close() error {
	if p.cancel != nil {
		p.cancel()
	}
	p.wg.Wait()
	if p.factory != nil {
		p.factory.Shutdown()
	}
	return nil
}

// report passes the plugin's state to StatusCheck.
func (p *Plugin) report(state health.State, err error) {
	if p.StatusCheck != nil {
		p.StatusCheck.ReportStateChange(p.String(), state, err)
	}
}
