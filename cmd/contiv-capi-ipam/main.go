// Command contiv-capi-ipam is the Contiv Cluster API IPAM provider: it
// serves the IPAddressClaims (ipam.cluster.x-k8s.io) whose poolRef names a
// ContivIPPool or a GlobalContivIPPool (ipam.contivpp.io) with IPAddresses
// cut by the allocator engine, on a management cluster, until SIGINT or
// SIGTERM. Several replicas may run; one leads (a Lease) and serves.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/contiv-ipam/agent/plugins/capi/ipamutil"
	"github.com/contiv-ipam/agent/plugins/capi/pool"
)

// Set by the linker (see the Makefile).
var (
	version   = "dev"
	commit    = "unknown"
	buildDate = "unknown"
)

// LeaderElectionID names the Lease the replicas elect their leader with.
const LeaderElectionID = "contiv-capi-ipam.ipam.contivpp.io"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.LookupEnv))
}

// options are the command line.
type options struct {
	kubeconfig      string
	metrics, health string
	leaderElect     bool
	leaderNamespace string
	watchFilter     string
	workers         int
	qps             float64
	burst           int
	debug, version  bool
	// versionCheck is how often discovery is asked whether the served
	// Cluster API versions changed.
	versionCheck time.Duration
	// skipNameCheck lets several managers run in one process (tests):
	// controller-runtime refuses a controller name it has seen before.
	skipNameCheck bool
}

// parse reads the flags; env gives KUBECONFIG and POD_NAMESPACE defaults.
func parse(args []string, stderr io.Writer, env func(string) (string, bool)) (options, error) {
	var o options
	fs := flag.NewFlagSet("contiv-capi-ipam", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kc, _ := env("KUBECONFIG")
	ns, ok := env("POD_NAMESPACE")
	if !ok || ns == "" {
		ns = "kube-system"
	}
	fs.StringVar(&o.kubeconfig, "kubeconfig", kc, "kubeconfig of the management cluster (env KUBECONFIG; empty: the in-cluster service account)")
	fs.StringVar(&o.metrics, "metrics-bind-address", "127.0.0.1:9192", "address of /metrics; \"0\" turns it off")
	fs.StringVar(&o.health, "health-probe-bind-address", "127.0.0.1:9193", "address of /healthz and /readyz; \"0\" turns it off")
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "elect one serving replica with the Lease "+LeaderElectionID)
	fs.StringVar(&o.leaderNamespace, "leader-election-namespace", ns, "namespace of the Lease (env POD_NAMESPACE, else kube-system)")
	fs.StringVar(&o.watchFilter, "watch-filter", "", "serve only the claims and Clusters labelled cluster.x-k8s.io/watch-filter with this value")
	fs.IntVar(&o.workers, "max-concurrent-reconciles", 8, "claims reconciled at once (the engine decides every address, so any number is safe)")
	fs.Float64Var(&o.qps, "kube-api-qps", 50, "requests per second to the API server, sustained (client-go's own default, 5, makes 1,000 claims take minutes)")
	fs.IntVar(&o.burst, "kube-api-burst", 100, "requests to the API server in a burst above -kube-api-qps")
	fs.DurationVar(&o.versionCheck, "api-version-check-interval", time.Minute, "how often to ask the API server which versions of the Cluster API groups it serves; when they change (an upgrade), the provider exits so that its restart talks the new ones")
	fs.BoolVar(&o.debug, "debug", false, "log at debug level")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.workers < 1 {
		return o, fmt.Errorf("-max-concurrent-reconciles %d: want at least 1", o.workers)
	}
	if o.versionCheck <= 0 {
		return o, fmt.Errorf("-api-version-check-interval %v: want above 0", o.versionCheck)
	}
	if !(o.qps > 0) || o.burst < 1 {
		return o, fmt.Errorf("-kube-api-qps %v, -kube-api-burst %d: want both above 0", o.qps, o.burst)
	}
	return o, nil
}

// run runs the provider until ctx ends; it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) (string, bool)) int {
	o, err := parse(args, stderr, env)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		_, _ = fmt.Fprintln(stderr, "contiv-capi-ipam:", err)
		return 2
	}
	if o.version {
		_, _ = fmt.Fprintf(stdout, "contiv-capi-ipam %s (commit %s, built %s)\n", version, commit, buildDate)
		return 0
	}
	level := slog.LevelInfo
	if o.debug {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if err := serve(ctx, o, log); err != nil {
		log.Error("contiv-capi-ipam stopped", "err", err)
		return 1
	}
	return 0
}

// serve builds the manager and runs it until ctx ends.
func serve(ctx context.Context, o options, log *slog.Logger) error {
	cfg, origin, err := restConfig(o.kubeconfig)
	if err != nil {
		return err
	}
	return serveOn(ctx, withRate(cfg, o), origin, o, log)
}

// withRate returns a copy of cfg whose client is limited to -kube-api-qps
// and -kube-api-burst.
func withRate(cfg *rest.Config, o options) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = float32(o.qps), o.burst
	return c
}

// serveOn is serve on cfg (origin says where it came from).
func serveOn(ctx context.Context, cfg *rest.Config, origin string, o options, log *slog.Logger) error {
	scheme, err := pool.NewScheme()
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme, Logger: logr.FromSlogHandler(log.Handler()),
		Metrics:                 metricsserver.Options{BindAddress: o.metrics},
		HealthProbeBindAddress:  o.health,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        LeaderElectionID,
		LeaderElectionNamespace: o.leaderNamespace,
		Controller:              config.Controller{SkipNameValidation: &o.skipNameCheck},
	})
	if err != nil {
		return fmt.Errorf("manager for %s: %w", cfg.Host, err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("discovery client for %s: %w", cfg.Host, err)
	}
	versions, err := ipamutil.DiscoverVersions(disc)
	if err != nil {
		return fmt.Errorf("%s: %w (are the Cluster API CRDs installed?)", cfg.Host, err)
	}
	if _, err := pool.Setup(ctx, mgr, pool.Options{WatchFilterValue: o.watchFilter, MaxConcurrentReconciles: o.workers, Log: log,
		Versions: versions}); err != nil {
		return err
	}
	watch := &ipamutil.VersionWatch{Discovery: disc, Started: versions, Interval: o.versionCheck,
		OnError: func(err error) { log.Warn("served Cluster API versions not checked", "err", err) }}
	if err := mgr.Add(watch); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	log.Info("contiv-capi-ipam starting", "version", version, "api-server", cfg.Host, "kubeconfig", origin,
		"ipam-version", ipamutil.IPAMGroup+"/"+versions.IPAM, "cluster-version", ipamutil.ClusterGroup+"/"+versions.Cluster,
		"leader-elect", o.leaderElect, "workers", o.workers, "kube-api-qps", cfg.QPS, "kube-api-burst", cfg.Burst, "metrics", o.metrics, "health", o.health)
	return mgr.Start(ctx)
}

// restConfig is the kubeconfig's, or the in-cluster one.
func restConfig(kubeconfig string) (*rest.Config, string, error) {
	if kubeconfig == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, "", fmt.Errorf("no -kubeconfig (or KUBECONFIG) and not in a pod: %w", err)
		}
		return cfg, "in-cluster", nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig %q: %w", kubeconfig, err)
	}
	return cfg, kubeconfig, nil
}
