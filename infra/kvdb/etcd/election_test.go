package etcd

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
)

const electionPrefix = "/test/election"

// campaignAsync runs Campaign in a goroutine and hands back its result.
func campaignAsync(ctx context.Context, p *Plugin, value string) <-chan kvdb.Leadership {
	out := make(chan kvdb.Leadership, 1)
	go func() {
		l, err := p.Campaign(ctx, electionPrefix, []byte(value), 2*time.Second)
		if err == nil {
			out <- l
		}
		close(out)
	}()
	return out
}

// fencedPut writes key only while l leads.
func fencedPut(t *testing.T, p *Plugin, l kvdb.Leadership, key string) bool {
	t.Helper()
	ok, err := p.Txn(t.Context(), []kvdb.Cmp{l.Fence()}, []kvdb.Op{kvdb.PutOp(key, []byte("v"))})
	if err != nil {
		t.Fatalf("fenced put %q: %v", key, err)
	}
	return ok
}

func TestOneCandidateLeadsAndTheNextTakesOverOnResign(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	a := startPlugin(t, fastConfig(srv.Endpoint()), nil)
	b := startPlugin(t, fastConfig(srv.Endpoint()), nil)

	first, err := a.Campaign(t.Context(), electionPrefix, []byte("a"), 2*time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	leader, found, err := b.Leader(t.Context(), electionPrefix)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue())
	g.Expect(string(leader)).To(Equal("a"))

	second := campaignAsync(t.Context(), b, "b")
	g.Consistently(second).WithTimeout(500 * time.Millisecond).ShouldNot(Receive())
	g.Expect(fencedPut(t, a, first, "/test/k")).To(BeTrue(), "the leader's fence holds")

	g.Expect(first.Resign(t.Context())).To(Succeed())
	g.Expect(first.Done()).To(BeClosed())
	g.Expect(first.Resign(t.Context())).To(Succeed(), "twice is a no-op")
	var l kvdb.Leadership
	g.Eventually(second).WithTimeout(5 * time.Second).Should(Receive(&l))
	g.Expect(fencedPut(t, a, first, "/test/k")).To(BeFalse(), "the old leader's fence no longer holds")
	g.Expect(fencedPut(t, b, l, "/test/k")).To(BeTrue())
	leader, _, err = a.Leader(t.Context(), electionPrefix)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(leader)).To(Equal("b"))
}

// A leader whose lease goes (as when its process is killed) loses the
// lead: Done closes, its fence fails and the next candidate leads.
func TestLeadershipIsLostWithItsLease(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	a := startPlugin(t, fastConfig(srv.Endpoint()), nil)
	b := startPlugin(t, fastConfig(srv.Endpoint()), nil)
	first, err := a.Campaign(t.Context(), electionPrefix, []byte("a"), 2*time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	second := campaignAsync(t.Context(), b, "b")

	raw := srv.Client(t)
	key := first.Fence().Key
	_, err = raw.Revoke(t.Context(), leaseOf(t, g, raw, key))
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(first.Done()).WithTimeout(5 * time.Second).Should(BeClosed())
	g.Expect(fencedPut(t, a, first, "/test/k")).To(BeFalse())
	var l kvdb.Leadership
	g.Eventually(second).WithTimeout(5 * time.Second).Should(Receive(&l))
	g.Expect(fencedPut(t, b, l, "/test/k")).To(BeTrue())
}

// Deleting the leader key by hand (an operator) ends the leadership too.
func TestLeadershipIsLostWhenItsKeyIsDeleted(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	a := startPlugin(t, fastConfig(srv.Endpoint()), nil)
	first, err := a.Campaign(t.Context(), electionPrefix, []byte("a"), 2*time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = srv.Client(t).Delete(t.Context(), first.Fence().Key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(first.Done()).WithTimeout(5 * time.Second).Should(BeClosed())
}

func TestCampaignEndsWithItsContextAndWithClose(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	a := startPlugin(t, fastConfig(srv.Endpoint()), nil)
	b := startPlugin(t, fastConfig(srv.Endpoint()), nil)
	first, err := a.Campaign(t.Context(), electionPrefix, []byte("a"), 2*time.Second)
	g.Expect(err).NotTo(HaveOccurred())

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, err = b.Campaign(ctx, electionPrefix, []byte("b"), 2*time.Second)
	g.Expect(err).To(MatchError(context.DeadlineExceeded))

	g.Expect(a.Close()).To(Succeed())
	g.Eventually(first.Done()).WithTimeout(5 * time.Second).Should(BeClosed())
	_, err = a.Campaign(t.Context(), electionPrefix, []byte("a"), 2*time.Second)
	g.Expect(err).To(MatchError(kvdb.ErrClosed))
}

func TestCampaignChecksItsArguments(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	a := startPlugin(t, fastConfig(srv.Endpoint()), nil)
	_, err := a.Campaign(t.Context(), "", []byte("a"), 2*time.Second)
	g.Expect(err).To(MatchError(kvdb.ErrInvalidKey))
	_, err = a.Campaign(t.Context(), electionPrefix, nil, 2*time.Second)
	g.Expect(err).To(MatchError(ContainSubstring("empty candidate value")))
	_, err = a.Campaign(t.Context(), electionPrefix, []byte("a"), 100*time.Millisecond)
	g.Expect(err).To(MatchError(ContainSubstring("ttl 100ms, want at least 1s")))
}
