package cluster

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/contiv-ipam/agent/plugins/ksr"
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
	return fmt.Sprintf("kubeconfig: %q\nresyncPeriod: %s\nnodeIDGracePeriod: %s\nelectionPrefix: %q\nelectionTTL: %s\n",
		c.Kubeconfig, c.ResyncPeriod, c.NodeIDGracePeriod, c.ElectionPrefix, c.ElectionTTL)
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
