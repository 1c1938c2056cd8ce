package nodeipam

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/contiv-ipam/agent/infra/kvdb"
)

// gatedLedger holds a Put of node gate after it is durable, until open is
// closed: the allocator is then between its claim and its patch.
type gatedLedger struct {
	Ledger
	gate  string
	held  chan struct{}
	open  chan struct{}
	calls chan error
}

func (l *gatedLedger) Put(ctx context.Context, c Claim) error {
	err := l.Ledger.Put(ctx, c)
	if c.Node == l.gate {
		close(l.held)
		<-l.open
	}
	select {
	case l.calls <- err:
	default:
	}
	return err
}

// startOn builds an allocator on client with ledger and runs it.
func startOn(t *testing.T, client *fake.Clientset, ledger Ledger) *RangeAllocator {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	factory, nodes := startInformer(ctx, client)
	a, err := New(ctx, Params{Client: client, Nodes: nodes, Config: testConfig("10.0.0.0/22"), Ledger: ledger,
		Recorder: record.NewFakeRecorder(100), Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); a.Run(ctx.Done()) }()
	t.Cleanup(func() { cancel(); <-done; factory.Shutdown() })
	return a.(*RangeAllocator)
}

// The old leader claimed 10.0.0.0/24 for n1 and its patch is still in
// flight when the new leader starts: the new leader finds the claim, gives
// n2 another CIDR, and the late patch lands on a consistent state. The old
// leader cannot claim anything more: its fence fails.
func TestALatePatchOfTheOldLeaderIsCoveredByItsClaim(t *testing.T) {
	g := NewWithT(t)
	db := etcdBroker(t)
	ctx := context.Background()
	g.Expect(db.Put(ctx, "/leader", []byte("old"))).To(Succeed())
	fence := func(who string) func() []kvdb.Cmp {
		return func() []kvdb.Cmp { return []kvdb.Cmp{kvdb.IfValue("/leader", []byte(who))} }
	}
	client := fake.NewClientset()
	oldLedger := &gatedLedger{Ledger: &EtcdLedger{DB: db, Prefix: DefaultClaimPrefix, Fence: fence("old")},
		gate: "n1", held: make(chan struct{}), open: make(chan struct{}), calls: make(chan error, 10)}
	startOn(t, client, oldLedger)
	_, err := client.CoreV1().Nodes().Create(ctx, node("n1"), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	<-oldLedger.held // the claim is in etcd, the patch not sent

	g.Expect(db.Put(ctx, "/leader", []byte("new"))).To(Succeed())
	fresh := startOn(t, client, &EtcdLedger{DB: db, Prefix: DefaultClaimPrefix, Fence: fence("new")})
	g.Expect(fresh.Status().Pending).To(Equal([]string{"n1"}), "the claim of the old leader")
	_, err = client.CoreV1().Nodes().Create(ctx, node("n2"), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	r := &rig{client: client}
	g.Eventually(func(g Gomega) {
		g.Expect(r.cidrsOf(g, "n1")).To(Equal([]string{"10.0.0.0/24"}), "the new leader patches the claimed CIDR")
		g.Expect(r.cidrsOf(g, "n2")).To(Equal([]string{"10.0.1.0/24"}))
	}).Should(Succeed())

	close(oldLedger.open) // the old leader's patch lands now: same CIDR, refused or a no-op
	_, err = client.CoreV1().Nodes().Create(ctx, node("n3"), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) { g.Expect(r.cidrsOf(g, "n3")).To(Equal([]string{"10.0.2.0/24"})) }).Should(Succeed())
	g.Eventually(func() bool {
		for {
			select {
			case err := <-oldLedger.calls:
				if errors.Is(err, ErrLostLead) {
					return true
				}
			default:
				return false
			}
		}
	}).Should(BeTrue(), "the old leader's claims for n2/n3 are refused by the fence")
	g.Expect(r.cidrsOf(g, "n1")).To(Equal([]string{"10.0.0.0/24"}))
	g.Expect(fresh.Status().Ranges[0].Used).To(Equal(uint64(3)))
	g.Eventually(func() []Claim { c, _ := fresh.ledger.List(ctx); return c }).Should(BeEmpty())
}
