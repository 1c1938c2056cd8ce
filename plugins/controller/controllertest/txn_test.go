package controllertest_test

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/controller/controllertest"
)

func TestTxnRecordsValues(t *testing.T) {
	g := NewWithT(t)
	var txn controllertest.Txn // the zero value works
	g.Expect(txn.Values()).To(BeEmpty())
	txn.Put("a", wrapperspb.String("a"))
	txn.Put("b", wrapperspb.String("b"))
	txn.Delete("b")
	g.Expect(txn.Get("a")).To(Equal(wrapperspb.String("a")))
	g.Expect(txn.Get("b")).To(BeNil())
	vals := txn.Values()
	g.Expect(vals).To(HaveLen(2))
	g.Expect(vals).To(HaveKeyWithValue("b", BeNil()), "a delete is a nil value")
	delete(vals, "a")
	g.Expect(txn.Values()).To(HaveKey("a"), "Values is a copy")
}

// blocking is a blocking event.
type blocking struct{ api.Shutdown }

func TestTxnFollowUps(t *testing.T) {
	refused := errors.New("refused")
	cases := []struct {
		name     string
		ev       api.Event
		hook     error
		wantErr  error
		recorded bool
	}{
		{name: "accepted", ev: &api.HealingResync{}, recorded: true},
		{name: "blocking refused", ev: &blocking{}, wantErr: api.ErrBlockingFollowUp},
		{name: "hook error returned", ev: &api.HealingResync{}, hook: refused, wantErr: refused},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var seen []api.Event
			txn := &controllertest.Txn{OnFollowUp: func(ev api.Event) error {
				seen = append(seen, ev)
				return tc.hook
			}}
			err := txn.PushFollowUp(tc.ev)
			if tc.wantErr != nil {
				g.Expect(err).To(MatchError(tc.wantErr))
			} else {
				g.Expect(err).NotTo(HaveOccurred())
			}
			if tc.recorded {
				g.Expect(txn.FollowUps()).To(Equal([]api.Event{tc.ev}))
				g.Expect(seen).To(Equal([]api.Event{tc.ev}))
			} else {
				g.Expect(txn.FollowUps()).To(BeEmpty())
			}
		})
	}
	g := NewWithT(t)
	g.Expect(controllertest.NewTxn().PushFollowUp(nil)).To(MatchError(ContainSubstring("nil event")))
}
