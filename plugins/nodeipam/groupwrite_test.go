package nodeipam

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/kvdb"
)

// txnLog is a Broker whose Txn records each transaction's ops; only Txn
// may be called. With gate set, every Txn first says so on entered, then
// waits for a value from gate. refuse makes every Txn fail its compares.
type txnLog struct {
	kvdb.Broker
	gate    chan struct{}
	entered chan struct{}
	refuse  bool

	mu   sync.Mutex
	txns [][]kvdb.Op
}

func (l *txnLog) Txn(ctx context.Context, _ []kvdb.Cmp, ops []kvdb.Op) (bool, error) {
	if l.gate != nil {
		l.entered <- struct{}{}
		select {
		case <-l.gate:
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.txns = append(l.txns, ops)
	return !l.refuse, nil
}

// keys returns the keys of every transaction, "-" marking a delete.
func (l *txnLog) keys() [][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([][]string, len(l.txns))
	for i, ops := range l.txns {
		for _, op := range ops {
			k := op.Key
			if op.Kind == kvdb.OpDelete {
				k = "-" + k
			}
			out[i] = append(out[i], k)
		}
	}
	return out
}

func gated() *txnLog {
	return &txnLog{gate: make(chan struct{}), entered: make(chan struct{}, 100)}
}

func queued(w *groupWriter) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.queue)
}

// put writes key from a new goroutine; its outcome arrives on the channel.
func put(w *groupWriter, db kvdb.Broker, ctx context.Context, key string) <-chan error {
	out := make(chan error, 1)
	go func() { out <- w.write(ctx, db, nil, key, kvdb.PutOp(key, nil), "record "+key) }()
	return out
}

// Writes queued while a transaction is in flight are committed together
// in the next one, in order; a key that comes again starts a new group, so
// its later write lands after the earlier one.
func TestWritesQueuedDuringATransactionShareTheNext(t *testing.T) {
	g := NewWithT(t)
	db := gated()
	var w groupWriter
	ctx := context.Background()
	first := put(&w, db, ctx, "a")
	<-db.entered // a's group is in flight
	b := put(&w, db, ctx, "b")
	g.Eventually(func() int { return queued(&w) }).Should(Equal(1))
	c := put(&w, db, ctx, "c")
	g.Eventually(func() int { return queued(&w) }).Should(Equal(2))
	del := make(chan error, 1)
	go func() { del <- w.write(ctx, db, nil, "b", kvdb.DeleteOp("b"), "delete b") }()
	g.Eventually(func() int { return queued(&w) }).Should(Equal(3))
	close(db.gate)
	for _, ch := range []<-chan error{first, b, c, del} {
		g.Expect(<-ch).To(Succeed())
	}
	g.Expect(db.keys()).To(Equal([][]string{{"a"}, {"b", "c"}, {"-b"}}))
	g.Expect(w.running).To(BeFalse(), "the last committer ended the role")
}

// A refused transaction (the lead is lost) fails every write of its group
// with ErrLostLead, each error naming its own write.
func TestALostLeadFailsEveryWriteOfTheGroup(t *testing.T) {
	g := NewWithT(t)
	db := gated()
	db.refuse = true
	var w groupWriter
	ctx := context.Background()
	first := put(&w, db, ctx, "a")
	<-db.entered
	b, c := put(&w, db, ctx, "b"), put(&w, db, ctx, "c")
	g.Eventually(func() int { return queued(&w) }).Should(Equal(2))
	close(db.gate)
	for key, ch := range map[string]<-chan error{"a": first, "b": b, "c": c} {
		err := <-ch
		g.Expect(errors.Is(err, ErrLostLead)).To(BeTrue(), "%s: %v", key, err)
		g.Expect(err.Error()).To(HavePrefix("record " + key + ": "))
	}
}

// A caller whose context ends while its write waits gets an error saying
// that the outcome is unknown; the write is still committed after it.
func TestAWriteLeftByItsCallerIsStillCommitted(t *testing.T) {
	g := NewWithT(t)
	db := gated()
	var w groupWriter
	first := put(&w, db, context.Background(), "a")
	<-db.entered
	ctx, cancel := context.WithCancel(context.Background())
	left := put(&w, db, ctx, "b")
	g.Eventually(func() int { return queued(&w) }).Should(Equal(1))
	cancel()
	err := <-left
	g.Expect(errors.Is(err, context.Canceled)).To(BeTrue())
	g.Expect(err.Error()).To(ContainSubstring("record b: queued, outcome unknown"))
	close(db.gate)
	g.Expect(<-first).To(Succeed())
	g.Expect(db.keys()).To(Equal([][]string{{"a"}, {"b"}}), "the committer commits the abandoned write before it ends")
	g.Expect(w.running).To(BeFalse())
}

// Many callers at once: every write is committed exactly once, in fewer
// transactions than writes, each transaction with distinct keys, and a
// caller returns only once its write is in a committed transaction.
func TestManyWritersShareTransactions(t *testing.T) {
	g := NewWithT(t)
	db := &txnLog{}
	var w groupWriter
	const writers, each = 32, 50
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			for j := range each {
				key := fmt.Sprintf("k%d", (i*each+j)%200) // keys repeat across writers
				if err := w.write(context.Background(), db, nil, key, kvdb.PutOp(key, []byte(fmt.Sprint(i, j))), "put"); err != nil {
					t.Error(err)
					return
				}
				if !committed(db, key, fmt.Sprint(i, j)) {
					t.Errorf("write %s=%d %d returned before its transaction", key, i, j)
				}
			}
		})
	}
	wg.Wait()
	total := 0
	for _, ops := range db.txns {
		seen := map[string]bool{}
		for _, op := range ops {
			g.Expect(seen[op.Key]).To(BeFalse(), "key %s twice in one transaction", op.Key)
			seen[op.Key] = true
		}
		g.Expect(len(ops)).To(BeNumerically("<=", maxGroup))
		total += len(ops)
	}
	g.Expect(total).To(Equal(writers * each))
	g.Expect(w.running).To(BeFalse())
	t.Logf("%d writes in %d transactions", total, len(db.txns))
}

func committed(db *txnLog, key, value string) bool {
	db.mu.Lock()
	defer db.mu.Unlock()
	for _, ops := range db.txns {
		for _, op := range ops {
			if op.Key == key && string(op.Value) == value {
				return true
			}
		}
	}
	return false
}

// The committer hands its role to the first caller still waiting, past a
// write whose caller has left: that caller commits the left write with
// its own, and the role ends with the queue.
func TestTheRolePassesToAWaitingCallerPastALeftWrite(t *testing.T) {
	g := NewWithT(t)
	db := gated()
	var w groupWriter
	first := put(&w, db, context.Background(), "a")
	<-db.entered
	ctx, cancel := context.WithCancel(context.Background())
	left := put(&w, db, ctx, "b")
	g.Eventually(func() int { return queued(&w) }).Should(Equal(1))
	cancel()
	g.Expect(<-left).To(MatchError(context.Canceled))
	waiting := put(&w, db, context.Background(), "c")
	g.Eventually(func() int { return queued(&w) }).Should(Equal(2))
	close(db.gate)
	g.Expect(<-first).To(Succeed())
	g.Expect(<-waiting).To(Succeed())
	g.Expect(db.keys()).To(Equal([][]string{{"a"}, {"b", "c"}}))
	w.mu.Lock()
	defer w.mu.Unlock()
	g.Expect(w.running).To(BeFalse())
}
