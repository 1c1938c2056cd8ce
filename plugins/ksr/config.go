package ksr

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/plugins/nodeipam"
)

// Defaults of ksr.conf.
const (
	DefaultResyncPeriod      = 5 * time.Minute
	DefaultMirrorHeartbeat   = 10 * time.Second
	DefaultNodeIDGracePeriod = 10 * time.Minute
	DefaultElectionPrefix    = "/contiv-ksr/election"
	DefaultElectionTTL       = 10 * time.Second
	DefaultKubeQPS           = 50
	DefaultKubeBurst         = 100
	// DefaultEndpoint is contiv-ksr's REST endpoint when http.conf names
	// none (the agent's is 127.0.0.1:9999).
	DefaultEndpoint = "127.0.0.1:9191"
)

// Config is ksr.conf.
type Config struct {
	// Kubeconfig is the kubeconfig file used when neither -kubeconfig
	// nor KUBECONFIG names one; "" with neither set means the in-cluster
	// config (the pod's service account).
	Kubeconfig string `json:"kubeconfig"`
	// KubeQPS and KubeBurst limit the requests to the API server (client-go
	// throttles above them; its own default, 5 and 10, would make node
	// IPAM patch 5 Nodes a second).
	KubeQPS   int `json:"kubeQPS"`
	KubeBurst int `json:"kubeBurst"`
	// ResyncPeriod is how often the leader makes etcd equal to the API
	// (mark and sweep), on top of the resync when it takes the lead.
	ResyncPeriod time.Duration `json:"resyncPeriod"`
	// MirrorHeartbeat is how often the leader rewrites the mirror marker
	// (plugins/ksr/model/mirror) once its mirror is complete; agents
	// release pods missing from the mirror only while it is fresh (three
	// heartbeats).
	MirrorHeartbeat time.Duration `json:"mirrorHeartbeat"`
	// PodLayout is where pods are written: "node" (each scheduled pod
	// under the node it runs on, k8s/node-pods/<node>/<name>/namespace/
	// <namespace>), "cluster" (k8s/pod/<name>/namespace/<namespace>,
	// Contiv's layout) or "both" (while agents of the cluster layout are
	// upgraded). A resync deletes the keys of a layout not written.
	PodLayout string `json:"podLayout"`
	// NodeIDGracePeriod is how long a Kubernetes Node must have been gone
	// before the leader frees its node ID (allocatedIDs/<id>).
	NodeIDGracePeriod time.Duration `json:"nodeIDGracePeriod"`
	// ElectionPrefix is the etcd prefix of the leader election among
	// contiv-ksr replicas.
	ElectionPrefix string `json:"electionPrefix"`
	// ElectionTTL is the lease of the leadership: a dead leader is
	// replaced at most this long after it stopped.
	ElectionTTL time.Duration `json:"electionTTL"`
	// NodeIPAM is the node pod-CIDR allocator the leader runs when it is
	// enabled (plugins/nodeipam).
	NodeIPAM nodeipam.Config `json:"nodeIPAM"`
	// PoolBlocks is the pool block server the leader runs when it has
	// ranges: the added pod-address blocks of the agents' elastic pools
	// (plugins/nodeipam, PoolBlockServer).
	PoolBlocks nodeipam.PoolBlockConfig `json:"poolBlocks"`
}

// DefaultConfig returns ksr.conf's defaults.
func DefaultConfig() Config {
	return Config{
		KubeQPS:           DefaultKubeQPS,
		KubeBurst:         DefaultKubeBurst,
		ResyncPeriod:      DefaultResyncPeriod,
		MirrorHeartbeat:   DefaultMirrorHeartbeat,
		PodLayout:         PodLayoutNode,
		NodeIDGracePeriod: DefaultNodeIDGracePeriod,
		ElectionPrefix:    DefaultElectionPrefix,
		ElectionTTL:       DefaultElectionTTL,
		NodeIPAM:          nodeipam.DefaultConfig(),
		PoolBlocks:        nodeipam.DefaultPoolBlockConfig(),
	}
}

// Validate names every bad key and its value.
func (c *Config) Validate() error {
	var errs []error
	if c.KubeQPS < 1 {
		errs = append(errs, fmt.Errorf("kubeQPS %d: want at least 1", c.KubeQPS))
	}
	if c.KubeBurst < c.KubeQPS {
		errs = append(errs, fmt.Errorf("kubeBurst %d: want at least kubeQPS (%d)", c.KubeBurst, c.KubeQPS))
	}
	if c.ResyncPeriod < time.Second {
		errs = append(errs, fmt.Errorf("resyncPeriod %s: want at least 1s", c.ResyncPeriod))
	}
	if c.MirrorHeartbeat < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("mirrorHeartbeat %s: want at least 100ms", c.MirrorHeartbeat))
	}
	if c.PodLayout != PodLayoutNode && c.PodLayout != PodLayoutCluster && c.PodLayout != PodLayoutBoth {
		errs = append(errs, fmt.Errorf("podLayout %q: want %q, %q or %q", c.PodLayout, PodLayoutNode, PodLayoutCluster, PodLayoutBoth))
	}
	if c.NodeIDGracePeriod < time.Second {
		errs = append(errs, fmt.Errorf("nodeIDGracePeriod %s: want at least 1s", c.NodeIDGracePeriod))
	}
	if err := kvdb.CheckKey(c.ElectionPrefix); err != nil || !strings.HasPrefix(c.ElectionPrefix, "/") ||
		strings.HasSuffix(c.ElectionPrefix, "/") {
		errs = append(errs, fmt.Errorf("electionPrefix %q: want an etcd key that starts and does not end with \"/\"", c.ElectionPrefix))
	}
	if c.ElectionTTL < kvdb.MinPresenceTTL {
		errs = append(errs, fmt.Errorf("electionTTL %s: want at least %s", c.ElectionTTL, kvdb.MinPresenceTTL))
	}
	if err := c.NodeIPAM.Validate(); err != nil {
		errs = append(errs, prefixLines("nodeIPAM.", err))
	}
	if err := c.PoolBlocks.ValidateWith(c.NodeIPAM); err != nil {
		errs = append(errs, prefixLines("poolBlocks.", err))
	}
	return errors.Join(errs...)
}

// prefixLines puts prefix before every line of err's message, so that a
// key of a section is named in full (nodeIPAM.clusterCIDRs).
func prefixLines(prefix string, err error) error {
	lines := strings.Split(err.Error(), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return errors.New(strings.Join(lines, "\n"))
}

// decodeConfig is the config given with UseConf, else ksr.conf over the
// defaults.
func (p *Plugin) decodeConfig() (Config, error) {
	return config.LoadOrFixed(p.Cfg, p.fixedConf, DefaultConfig())
}
