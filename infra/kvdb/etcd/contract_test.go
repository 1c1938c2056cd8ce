package etcd

import (
	"testing"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/infra/kvdb/kvdbtest"
)

func TestContract(t *testing.T) {
	srv := etcdtest.Start(t)
	raw := srv.Client(t)
	kvdbtest.RunContract(t, func(t *testing.T) (kvdb.Broker, kvdb.Broker) {
		_, err := raw.Delete(t.Context(), "", clientv3.WithPrefix())
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		// Two plugins: two separate clients of one server.
		a := startPlugin(t, fastConfig(srv.Endpoint()), nil)
		b := startPlugin(t, fastConfig(srv.Endpoint()), nil)
		return a, b
	})
}

// The same contract against an external etcd: the etcd binary the
// Kubernetes tests use, as a child process.
func TestContractExternal(t *testing.T) {
	proc := etcdtest.StartProcess(t)
	raw := proc.Client(t)
	kvdbtest.RunContract(t, func(t *testing.T) (kvdb.Broker, kvdb.Broker) {
		_, err := raw.Delete(t.Context(), "", clientv3.WithPrefix())
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		a := startPlugin(t, fastConfig(proc.Endpoint()), nil)
		b := startPlugin(t, fastConfig(proc.Endpoint()), nil)
		return a, b
	})
}

func TestPresenceContract(t *testing.T) {
	srv := etcdtest.Start(t)
	raw := srv.Client(t)
	kvdbtest.RunPresenceContract(t, func(t *testing.T) kvdbtest.PresenceClients {
		_, err := raw.Delete(t.Context(), "", clientv3.WithPrefix())
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		a := startPlugin(t, fastConfig(srv.Endpoint()), nil)
		b := startPlugin(t, fastConfig(srv.Endpoint()), nil)
		// Close stops the client without revoking anything: a killed agent.
		return kvdbtest.PresenceClients{A: a, B: b, Read: b, Crash: func() { _ = a.Close() }}
	})
}

func TestOutcomeContract(t *testing.T) {
	srv := etcdtest.Start(t)
	raw := srv.Client(t)
	kvdbtest.RunOutcomeContract(t, func(t *testing.T) kvdbtest.Outcomes {
		_, err := raw.Delete(t.Context(), "", clientv3.WithPrefix())
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		// A talks to the server through a proxy that can hold its
		// requests; B directly.
		proxy := etcdtest.NewProxy(t, srv.Endpoint())
		a := startPlugin(t, fastConfig(proxy.Addr()), nil)
		b := startPlugin(t, fastConfig(srv.Endpoint()), nil)
		return kvdbtest.Outcomes{A: a, B: b, StallTaken: func() func() {
			proxy.Stall()
			return proxy.Release
		}}
	})
}
