package nodeipam

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
)

func mustPrefixes(strs ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(strs))
	for i, s := range strs {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// etcdBroker returns an etcd plugin on a test server, closed at cleanup.
func etcdBroker(t *testing.T) kvdb.Broker {
	t.Helper()
	srv := etcdtest.Start(t)
	c := etcd.DefaultConfig()
	c.Endpoints = []string{srv.Endpoint()}
	c.DialTimeout = 3 * time.Second
	c.OperationTimeout = 2 * time.Second
	db := etcd.NewPlugin(etcd.UseConf(c), etcd.UseEnv(func(string) (string, bool) { return "", false }),
		etcd.UseDeps(func(d *etcd.Deps) { d.Cfg, d.Log = config.NoFile, slog.New(slog.DiscardHandler) }))
	if err := db.Init(); err != nil {
		t.Fatalf("etcd plugin Init: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// TestCloudRoundTrip runs the same checks on both Cloud implementations.
func TestCloudRoundTrip(t *testing.T) {
	db := etcdBroker(t)
	clouds := []struct {
		name  string
		cloud Cloud
	}{
		{"mem", NewMemCloud()},
		{"etcd", &EtcdCloud{DB: db, Prefix: DefaultCloudPrefix}},
	}
	for _, c := range clouds {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := t.Context()
			got, err := c.cloud.NodeRanges(ctx, "worker/1")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(BeEmpty())
			for _, want := range [][]netip.Prefix{
				mustPrefixes("10.1.2.0/24"),
				mustPrefixes("10.1.2.0/24", "fd00:1::/64"),
				mustPrefixes("fd00:1::/64", "10.1.3.0/24"),
			} {
				g.Expect(c.cloud.SetNodeRanges(ctx, "worker/1", want)).To(Succeed())
				g.Expect(c.cloud.NodeRanges(ctx, "worker/1")).To(Equal(want))
			}
			g.Expect(c.cloud.NodeRanges(ctx, "worker-2")).To(BeEmpty())
			g.Expect(c.cloud.SetNodeRanges(ctx, "worker/1", nil)).To(Succeed())
			g.Expect(c.cloud.NodeRanges(ctx, "worker/1")).To(BeEmpty())
		})
	}
}

func TestEtcdCloudKeyLayout(t *testing.T) {
	g := NewWithT(t)
	db := etcdBroker(t)
	cloud := &EtcdCloud{DB: db, Prefix: "/cloud/"}
	g.Expect(cloud.SetNodeRanges(t.Context(), "a/b", mustPrefixes("10.1.2.0/24", "fd00:1::/64"))).To(Succeed())
	kv, found, err := db.Get(t.Context(), "/cloud/a%2Fb")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue())
	g.Expect(string(kv.Value)).To(MatchJSON(`{"ranges":["10.1.2.0/24","fd00:1::/64"]}`))

	g.Expect(db.Put(t.Context(), "/cloud/op", []byte(`{"ranges":["10.9.0.0/24"]}`))).To(Succeed())
	g.Expect(cloud.NodeRanges(t.Context(), "op")).To(Equal(mustPrefixes("10.9.0.0/24")))
}

func TestEtcdCloudRefusesACorruptValue(t *testing.T) {
	db := etcdBroker(t)
	cloud := &EtcdCloud{DB: db, Prefix: "/cloud/"}
	for _, tc := range []struct{ name, value string }{
		{"not JSON", `10.1.2.0/24`},
		{"not a list", `{"ranges":"10.1.2.0/24"}`},
		{"not a CIDR", `{"ranges":["10.1.2.0/24","fd00:1::"]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(db.Put(t.Context(), "/cloud/bad", []byte(tc.value))).To(Succeed())
			_, err := cloud.NodeRanges(t.Context(), "bad")
			g.Expect(err).To(MatchError(ContainSubstring("/cloud/bad")))
			g.Expect(err.Error()).To(ContainSubstring(fmt.Sprintf("%q", tc.value)))
		})
	}
}

func TestMemCloudFaultHook(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cloud := NewMemCloud()
	boom := errors.New("boom")
	cloud.SetFault(func(op, node string) error {
		if op == CloudOpSet && node == "a" {
			return boom
		}
		return nil
	})
	g.Expect(cloud.SetNodeRanges(ctx, "a", mustPrefixes("10.0.0.0/24"))).To(MatchError(boom))
	g.Expect(cloud.SetNodeRanges(ctx, "b", mustPrefixes("10.0.1.0/24"))).To(Succeed())
	g.Expect(cloud.NodeRanges(ctx, "a")).To(BeEmpty())
	g.Expect(cloud.Calls(CloudOpSet)).To(Equal(2))
	cloud.SetFault(nil)
	g.Expect(cloud.SetNodeRanges(ctx, "a", mustPrefixes("10.0.0.0/24"))).To(Succeed())

	// The slices returned and passed are copies.
	got, _ := cloud.NodeRanges(ctx, "a")
	got[0] = netip.MustParsePrefix("10.9.9.0/24")
	g.Expect(cloud.NodeRanges(ctx, "a")).To(Equal(mustPrefixes("10.0.0.0/24")))
}

// The etcd-backed writes carry the fence: a replica that lost the lead
// changes nothing, and the error says so.
func TestEtcdWritesCarryTheFence(t *testing.T) {
	g := NewWithT(t)
	db := etcdBroker(t)
	ctx := t.Context()
	g.Expect(db.Put(ctx, "/leader", []byte("me"))).To(Succeed())
	fence := func() []kvdb.Cmp { return []kvdb.Cmp{kvdb.IfValue("/leader", []byte("me"))} }
	cloud := &EtcdCloud{DB: db, Prefix: "/cloud/", Fence: fence}
	ledger := &EtcdLedger{DB: db, Prefix: "/claims/", Fence: fence}
	g.Expect(cloud.SetNodeRanges(ctx, "a", mustPrefixes("10.1.2.0/24"))).To(Succeed())
	g.Expect(ledger.Put(ctx, Claim{Node: "a", UID: "u", CIDRs: []string{"10.1.2.0/24"}})).To(Succeed())

	g.Expect(db.Put(ctx, "/leader", []byte("other"))).To(Succeed())
	for name, err := range map[string]error{
		"cloud put":     cloud.SetNodeRanges(ctx, "a", mustPrefixes("10.1.3.0/24")),
		"cloud delete":  cloud.SetNodeRanges(ctx, "a", nil),
		"ledger put":    ledger.Put(ctx, Claim{Node: "b", CIDRs: []string{"10.1.4.0/24"}}),
		"ledger delete": ledger.Delete(ctx, "a"),
	} {
		g.Expect(errors.Is(err, ErrLostLead)).To(BeTrue(), "%s: %v", name, err)
	}
	g.Expect(cloud.NodeRanges(ctx, "a")).To(Equal(mustPrefixes("10.1.2.0/24")))
	claims, err := ledger.List(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(claims).To(Equal([]Claim{{Node: "a", UID: "u", CIDRs: []string{"10.1.2.0/24"}}}))
}
