package controller_test

import (
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/agent"
	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/health"
	"github.com/contiv-ipam/agent/infra/kvdb/bolt"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/infra/rest/resttest"
	"github.com/contiv-ipam/agent/plugins/controller"
)

// With etcd stopped the agent is unready (the body names etcd) but live:
// Kubernetes must not restart every agent when etcd is down. It is ready
// again once etcd is back.
func TestProbesWithEtcdStopped(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	http := resttest.New(t)
	healthP := health.NewPlugin(health.UseConf(health.Config{ProbeInterval: 50 * time.Millisecond}),
		health.UseDeps(func(d *health.Deps) { d.Cfg, d.Log, d.HTTP = config.NoFile, quietLog(), http.Plugin }))
	ec := fastEtcd(srv.Endpoint())
	ec.DialTimeout = time.Second
	etcdP := etcd.NewPlugin(etcd.UseConf(ec), etcd.UseEnv(noEnv), etcd.UseDeps(func(d *etcd.Deps) {
		d.Cfg, d.Log, d.StatusCheck = config.NoFile, quietLog(), healthP
	}))
	bc := bolt.DefaultConfig()
	bc.DBPath = filepath.Join(t.TempDir(), "bolt.db")
	boltP := bolt.NewPlugin(bolt.UseConf(bc), bolt.UseDeps(func(d *bolt.Deps) { d.Cfg, d.Log = config.NoFile, quietLog() }))
	ctrl := controller.NewPlugin(controller.UseHandlers(&recorder{}), controller.UseDeps(func(d *controller.Deps) {
		d.Cfg, d.Log = config.NoFile, quietLog()
		d.RemoteDB, d.LocalDB, d.HTTP, d.StatusCheck = etcdP, boltP, http.Plugin, healthP
	}))
	a, err := agent.NewAgent(agent.Plugins(healthP, etcdP, boltP, ctrl), agent.Args(nil), agent.Logger(quietLog()))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a.Start()).To(Succeed())
	t.Cleanup(func() { _ = a.Stop() })
	status := func(path string) func() int {
		return func() int { code, _ := http.Get(path); return code }
	}

	g.Eventually(status(health.ReadinessPath)).WithTimeout(15*time.Second).Should(Equal(200), "ready after the first DB resync")
	g.Expect(status(health.LivenessPath)()).To(Equal(200))

	srv.Stop()
	g.Eventually(status(health.ReadinessPath)).WithTimeout(15*time.Second).Should(Equal(503), "unready without etcd")
	code, body := http.Get(health.LivenessPath)
	g.Expect(code).To(Equal(200), "live without etcd: %s", body)
	g.Expect(body).To(And(ContainSubstring(`"live": "ok"`), MatchRegexp(`"name": "etcd",\s+"state": "error"`)))

	srv.Restart()
	g.Eventually(status(health.ReadinessPath)).WithTimeout(15*time.Second).Should(Equal(200), "ready again with etcd")
	g.Expect(status(health.LivenessPath)()).To(Equal(200))
}
