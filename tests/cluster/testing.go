package cluster

import (
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/contiv-ipam/agent/plugins/ksr"
	"github.com/contiv-ipam/agent/tests/testenv"
)

// TestBins are testenv's binaries (testenv.Main built them) and the etcd
// of kubeenv.AssetsDir(); a missing one fails the test.
func TestBins(t testing.TB) Bins {
	t.Helper()
	b, err := BinsIn(testenv.Binaries().Dir)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// StartT is Start for a test: the processes live in t.TempDir() and are
// killed at cleanup; an error fails the test.
func StartT(t testing.TB, bins Bins, kubeconfig string) *Cluster {
	t.Helper()
	c, err := Start(t.Context(), t.TempDir(), bins, kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Kill(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			for _, p := range c.Procs() {
				t.Logf("%s (pid %d): %s", p.Name, p.PID(), p.tail())
			}
		}
	})
	return c
}

// AddKSRT is AddKSR for a test.
func (c *Cluster) AddKSRT(t testing.TB, conf ksr.Config) *KSR {
	t.Helper()
	k, err := c.AddKSR(t.Context(), conf)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// AddAgentT is AddAgent for a test.
func (c *Cluster) AddAgentT(t testing.TB, o AgentOptions) *Agent {
	t.Helper()
	a, err := c.AddAgent(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// ClientT is a client of the cluster's etcd, closed at cleanup.
func (c *Cluster) ClientT(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := c.Etcd.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}
