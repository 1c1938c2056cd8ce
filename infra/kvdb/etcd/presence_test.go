package etcd

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
)

// leaseOf returns the lease the key is bound to.
func leaseOf(t *testing.T, g Gomega, cli *clientv3.Client, key string) clientv3.LeaseID {
	t.Helper()
	resp, err := cli.Get(t.Context(), key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.Kvs).To(HaveLen(1), "key %q", key)
	return clientv3.LeaseID(resp.Kvs[0].Lease)
}

func TestPresenceUsesTheTTLRoundedUp(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	p := startPlugin(t, fastConfig(srv.Endpoint()), nil)
	pres, err := p.ClaimPresence(t.Context(), "/presence/x", []byte("me"), 1500*time.Millisecond)
	g.Expect(err).NotTo(HaveOccurred())
	raw := srv.Client(t)
	resp, err := raw.TimeToLive(t.Context(), leaseOf(t, g, raw, "/presence/x"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.GrantedTTL).To(BeEquivalentTo(2), "whole seconds, rounded up")
	g.Expect(pres.Release(t.Context())).To(Succeed())
}

func TestPresenceIsLostWhenItsLeaseIsRevoked(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	p := startPlugin(t, fastConfig(srv.Endpoint()), nil)
	pres, err := p.ClaimPresence(t.Context(), "/presence/r", []byte("me"), 2*time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	raw := srv.Client(t)
	_, err = raw.Revoke(t.Context(), leaseOf(t, g, raw, "/presence/r"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(pres.Lost()).WithTimeout(10 * time.Second).Should(BeClosed())
	g.Expect(pres.Release(t.Context())).To(Succeed(), "revoking a revoked lease is not an error")

	again, err := p.ClaimPresence(t.Context(), "/presence/r", []byte("me"), 2*time.Second)
	g.Expect(err).NotTo(HaveOccurred(), "claimed again once lost")
	g.Expect(again.Release(t.Context())).To(Succeed())
}

// An outage longer than the TTL loses the presence; after it the same
// holder takes its key back even if the restarted server still holds it
// (etcd extends leases when it restarts).
func TestPresenceIsLostDuringAnOutageAndTakenBack(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	p := startPlugin(t, fastConfig(srv.Endpoint()), nil)
	pres, err := p.ClaimPresence(t.Context(), "/presence/o", []byte("me"), time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	srv.Stop()
	g.Eventually(pres.Lost()).WithTimeout(10 * time.Second).Should(BeClosed())
	srv.Restart()

	var back kvdb.Presence
	g.Eventually(func() error {
		back, err = p.ClaimPresence(t.Context(), "/presence/o", []byte("me"), time.Second)
		return err
	}).WithTimeout(10 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
	g.Expect(back.Lost()).NotTo(BeClosed())
	g.Expect(back.Release(t.Context())).To(Succeed())
}

func TestPresenceAfterClose(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	p := startPlugin(t, fastConfig(srv.Endpoint()), nil)
	pres, err := p.ClaimPresence(t.Context(), "/presence/c", []byte("me"), 5*time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.Close()).To(Succeed())
	g.Expect(pres.Lost()).To(BeClosed(), "Close waits for the keep-alive goroutine")
	_, err = p.ClaimPresence(t.Context(), "/presence/c", []byte("me"), 5*time.Second)
	g.Expect(err).To(MatchError(kvdb.ErrClosed))
	g.Expect(pres.Release(t.Context())).To(MatchError(kvdb.ErrClosed))
}
