package cluster

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/contiv-ipam/agent/plugins/ksr"
	"github.com/contiv-ipam/agent/plugins/nodeipam"
	"github.com/contiv-ipam/agent/tests/testenv"
)

// KSR is a contiv-ksr replica.
type KSR struct {
	*Proc
	// REST is the base URL of its REST server, "http://127.0.0.1:port".
	REST string
}

// ksrConf is the ksr.conf of c, its zero fields set to the defaults.
func ksrConf(c ksr.Config) string {
	d := ksr.DefaultConfig()
	c.ResyncPeriod = cmp.Or(c.ResyncPeriod, d.ResyncPeriod)
	c.NodeIDGracePeriod = cmp.Or(c.NodeIDGracePeriod, d.NodeIDGracePeriod)
	c.ElectionPrefix = cmp.Or(c.ElectionPrefix, d.ElectionPrefix)
	c.ElectionTTL = cmp.Or(c.ElectionTTL, d.ElectionTTL)
	conf := fmt.Sprintf("kubeconfig: %q\nresyncPeriod: %s\nnodeIDGracePeriod: %s\nelectionPrefix: %q\nelectionTTL: %s\n",
		c.Kubeconfig, c.ResyncPeriod, c.NodeIDGracePeriod, c.ElectionPrefix, c.ElectionTTL)
	if c.MirrorHeartbeat > 0 {
		conf += fmt.Sprintf("mirrorHeartbeat: %s\n", c.MirrorHeartbeat)
	}
	if c.KubeQPS > 0 {
		conf += fmt.Sprintf("kubeQPS: %d\nkubeBurst: %d\n", c.KubeQPS, cmp.Or(c.KubeBurst, 2*c.KubeQPS))
	}
	if c.NodeIPAM.Enabled {
		conf += nodeIPAMConf(c.NodeIPAM)
	}
	return conf
}

// nodeIPAMConf is the nodeIPAM section of ksr.conf for n, its zero fields
// set to nodeipam.DefaultConfig()'s values and every key written (the
// durations as strings: the decoder refuses bare numbers).
func nodeIPAMConf(n nodeipam.Config) string {
	d := nodeipam.DefaultConfig()
	n.AllocatorType = cmp.Or(n.AllocatorType, d.AllocatorType)
	n.NodeCIDRMaskSizeIPv4 = cmp.Or(n.NodeCIDRMaskSizeIPv4, d.NodeCIDRMaskSizeIPv4)
	n.NodeCIDRMaskSizeIPv6 = cmp.Or(n.NodeCIDRMaskSizeIPv6, d.NodeCIDRMaskSizeIPv6)
	n.Resync = cmp.Or(n.Resync, d.Resync)
	n.MaxBackoff = cmp.Or(n.MaxBackoff, d.MaxBackoff)
	n.InitialRetry = cmp.Or(n.InitialRetry, d.InitialRetry)
	n.Workers = cmp.Or(n.Workers, d.Workers)
	n.ClaimPrefix = cmp.Or(n.ClaimPrefix, d.ClaimPrefix)
	n.CloudPrefix = cmp.Or(n.CloudPrefix, d.CloudPrefix)
	quoted := make([]string, len(n.ClusterCIDRs))
	for i, s := range n.ClusterCIDRs {
		quoted[i] = strconv.Quote(s)
	}
	var b strings.Builder
	b.WriteString("nodeIPAM:\n")
	fmt.Fprintf(&b, "  enabled: %t\n  allocatorType: %q\n  clusterCIDRs: [%s]\n", n.Enabled, n.AllocatorType,
		strings.Join(quoted, ", "))
	fmt.Fprintf(&b, "  serviceCIDR: %q\n  secondaryServiceCIDR: %q\n", n.ServiceCIDR, n.SecondaryServiceCIDR)
	fmt.Fprintf(&b, "  nodeCIDRMaskSizeIPv4: %d\n  nodeCIDRMaskSizeIPv6: %d\n", n.NodeCIDRMaskSizeIPv4, n.NodeCIDRMaskSizeIPv6)
	fmt.Fprintf(&b, "  resync: %q\n  maxBackoff: %q\n  initialRetry: %q\n", n.Resync, n.MaxBackoff, n.InitialRetry)
	fmt.Fprintf(&b, "  workers: %d\n  claimPrefix: %q\n  cloudPrefix: %q\n", n.Workers, n.ClaimPrefix, n.CloudPrefix)
	return b.String()
}

// etcdConf is the etcd.conf of a process that uses the etcd at endpoint.
func etcdConf(endpoint string) string {
	return fmt.Sprintf("endpoints: [%q]\n", endpoint)
}

// startKSR writes the config directory dir (ksr.conf from conf, etcd.conf
// naming endpoint, the REST server on a loopback port the kernel chooses)
// and runs contiv-ksr on it with KUBECONFIG=kubeconfig, until its
// /readiness answers 200 (the informers have listed the API).
func startKSR(ctx context.Context, bin, dir, name, endpoint, kubeconfig string, conf ksr.Config) (*KSR, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	files := map[string]string{"ksr.conf": ksrConf(conf), "etcd.conf": etcdConf(endpoint),
		"http.conf": "endpoint: 127.0.0.1:0\n"}
	if err := testenv.WriteConfig(dir, files); err != nil {
		return nil, err
	}
	env := append(os.Environ(), "CONFIG_DIR="+dir, "LOG_FORMAT=json", "KUBECONFIG="+kubeconfig,
		"HTTP_PORT=", "ETCD_ENDPOINTS=", "INITIAL_LOGLVL=")
	p, err := startProc(procSpec{name: name, bin: bin, dir: dir, env: env, ready: readyLine("contiv-ksr ready")})
	if err != nil {
		return nil, err
	}
	k := &KSR{Proc: p}
	if k.REST, err = p.waitReady(ctx, startTimeout); err == nil {
		err = waitReadiness(ctx, p, k.REST)
	}
	if err != nil {
		return nil, joinKill(err, p)
	}
	return k, nil
}

// readyLine matches the log line msg of contiv-agent and contiv-ksr; its
// value is the REST base URL (the "rest" attribute without the final /).
func readyLine(msg string) func(map[string]any) (string, bool) {
	return func(rec map[string]any) (string, bool) {
		rest, _ := rec["rest"].(string)
		return strings.TrimSuffix(rest, "/"), rec["msg"] == msg && rest != ""
	}
}

// Status reads GET /contiv/v1/ksr.
func (k *KSR) Status(ctx context.Context) (ksr.Status, error) {
	var s ksr.Status
	err := GetJSON(ctx, k.REST+ksr.StatusPath, &s)
	return s, err
}

// Resync asks the replica for a resync now (POST /contiv/v1/ksr/resync;
// a standby answers 409, an error).
func (k *KSR) Resync(ctx context.Context) error { return Post(ctx, k.REST+ksr.ResyncPath) }
