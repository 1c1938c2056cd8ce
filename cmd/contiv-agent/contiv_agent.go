package main

import (
	"github.com/contiv-ipam/agent/infra"
	"github.com/contiv-ipam/agent/infra/command"
	"github.com/contiv-ipam/agent/infra/health"
	"github.com/contiv-ipam/agent/infra/kvdb/bolt"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd"
	"github.com/contiv-ipam/agent/infra/logging"
	"github.com/contiv-ipam/agent/infra/logmanager"
	"github.com/contiv-ipam/agent/infra/metrics"
	"github.com/contiv-ipam/agent/infra/rest"
	"github.com/contiv-ipam/agent/infra/servicelabel"
	"github.com/contiv-ipam/agent/plugins/contivconf"
	"github.com/contiv-ipam/agent/plugins/controller"
	"github.com/contiv-ipam/agent/plugins/ipam"
	"github.com/contiv-ipam/agent/plugins/nodesync"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// pluginName names the top-level plugin (and its logger).
const pluginName = "contiv-agent"

// ContivAgent is the top-level plugin: its exported fields are every plugin
// the agent runs, so the agent finds and orders them by reflection.
type ContivAgent struct {
	infra.PluginDeps

	LogManager   *logmanager.Plugin
	HTTP         *rest.Plugin
	Metrics      *metrics.Plugin
	Health       *health.Plugin
	ServiceLabel *servicelabel.Plugin
	ETCD         *etcd.Plugin
	Bolt         *bolt.Plugin
	Controller   *controller.Plugin
	ContivConf   *contivconf.Plugin
	NodeSync     *nodesync.Plugin
	PodManager   *podmanager.Plugin
	IPAM         *ipam.Plugin
}

var (
	_ infra.Plugin   = (*ContivAgent)(nil)
	_ infra.PostInit = (*ContivAgent)(nil)
)

// newContivAgent wires every plugin with one shared log registry.
func newContivAgent(reg *logging.Registry, build health.BuildInfo) *ContivAgent {
	base := command.NewBase(reg, build)
	a := &ContivAgent{
		HTTP:       base.HTTP,
		Metrics:    base.Metrics,
		Health:     base.Health,
		LogManager: base.LogManager,
		ETCD:       base.ETCD,
		ServiceLabel: servicelabel.NewPlugin(servicelabel.UseDeps(func(d *servicelabel.Deps) {
			d.LogRegistry = reg
		})),
		Bolt: bolt.NewPlugin(bolt.UseDeps(func(d *bolt.Deps) { d.LogRegistry = reg })),
	}
	a.addControllerAndHandlers(reg)
	a.SetName(pluginName)
	a.LogRegistry = reg
	a.SetupLog()
	return a
}

// addControllerAndHandlers builds the controller and its event handlers.
// Handlers push follow-up events through the transactions the controller
// gives them; nodesync also pushes events from its own goroutine, through
// a controller.LoopRef given to it and to the controller at construction
// (that breaks the cycle "the controller calls the handlers, the handlers
// push events into the controller"); podmanager pushes the CNI calls'
// events through the same LoopRef. The
// handlers run in this order (reversed for deletions), declared here once
// and asserted by TestHandlerOrder:
//   - contivconf: first, so that everyone sees this node's config;
//   - nodesync: claims the node ID and knows every node; before ipam,
//     which reads the node ID and follows NodeUpdate events;
//   - podmanager: records the local pod of an AddPod before ipam
//     allocates, so that a failing ipam reverts the record (RevertOnFailure
//     reverts the handlers that ran before the failing one); DeletePod
//     runs in reverse, so ipam releases before podmanager forgets;
//   - ipam: derives the addresses from the config and the node ID, and
//     allocates and releases pod addresses on AddPod, DeletePod, GCPods.
func (a *ContivAgent) addControllerAndHandlers(reg *logging.Registry) {
	loop := &controller.LoopRef{}
	a.ContivConf = contivconf.NewPlugin(contivconf.UseDeps(func(d *contivconf.Deps) {
		d.LogRegistry = reg
		d.ServiceLabel = a.ServiceLabel
		d.Metrics, d.StatusCheck = a.Metrics, a.Health
	}))
	a.NodeSync = nodesync.NewPlugin(nodesync.UseDeps(func(d *nodesync.Deps) {
		d.LogRegistry = reg
		d.ServiceLabel, d.DB, d.EventLoop = a.ServiceLabel, a.ETCD, loop
		// etcd's leases refuse a second live agent with this node name;
		// bolt keeps the last node ID so that a change is never silent.
		d.Presence, d.LocalDB, d.Metrics, d.StatusCheck = a.ETCD, a.Bolt, a.Metrics, a.Health
		// Never claim an ID the node subnets of ipamConfig cannot serve.
		d.MaxNodeID = func() uint32 {
			return ipam.MaxNodeID(a.ContivConf.GetIPAMConfig(), a.ContivConf.GetStaticDefaultGW())
		}
	}))
	a.IPAM = ipam.NewPlugin(ipam.UseDeps(func(d *ipam.Deps) {
		d.LogRegistry = reg
		d.ContivConf, d.NodeSync, d.ServiceLabel = a.ContivConf, a.NodeSync, a.ServiceLabel
		d.LocalDB = a.Bolt
		d.HTTP, d.Metrics, d.StatusCheck = a.HTTP, a.Metrics, a.Health
		// Elastic pools (ipam.conf warmTarget): the claims go to etcd,
		// where contiv-ksr's nodeipam answers them.
		d.PoolClaims = ipam.StoreClaimer{DB: a.ETCD}
		// The status record (ipam.conf statusPublishPeriod) goes to etcd,
		// with the REST URL of http.conf (advertise-url, or derived).
		d.StatusDB, d.REST = a.ETCD, a.HTTP
	}))
	a.PodManager = podmanager.NewPlugin(podmanager.UseDeps(func(d *podmanager.Deps) {
		d.LogRegistry = reg
		d.EventLoop, d.IPAM = loop, a.IPAM
		d.Metrics, d.StatusCheck = a.Metrics, a.Health
	}))
	a.Controller = controller.NewPlugin(controller.UseLoopRef(loop),
		controller.UseHandlers(a.ContivConf, a.NodeSync, a.PodManager, a.IPAM),
		controller.UseDeps(func(d *controller.Deps) {
			d.LogRegistry = reg
			d.RemoteDB, d.LocalDB = a.ETCD, a.Bolt
			d.HTTP, d.Metrics, d.StatusCheck = a.HTTP, a.Metrics, a.Health
			d.NodeName = a.ServiceLabel.GetAgentLabel
		}))
}

// Init has nothing to do: the plugins it lists are initialised before it.
func (a *ContivAgent) Init() error { return nil }

// AfterInit reports the agent healthy and logs where to look.
func (a *ContivAgent) AfterInit() error {
	a.Health.ReportStateChange(a.String(), health.OK, nil)
	label := a.ServiceLabel.GetAgentLabel()
	addr := a.HTTP.Addr()
	if addr == "" {
		a.Log.Info("agent ready; REST server disabled", "label", label)
		return nil
	}
	scheme := "http"
	if a.HTTP.TLS() {
		scheme = "https"
	}
	base := scheme + "://" + addr
	a.Log.Info("agent ready", "label", label,
		"rest", base+"/", "ipam", base+ipam.IPAMPath, "readiness", base+"/readiness", "metrics", base+"/metrics")
	return nil
}

// Close has nothing to release.
func (a *ContivAgent) Close() error { return nil }
