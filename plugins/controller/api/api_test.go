package api_test

import (
	"errors"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/controller/controllertest"
)

func TestBuiltInEvents(t *testing.T) {
	g := NewWithT(t)
	n1 := wrapperspb.String("n1")
	cases := []struct {
		ev       api.Event
		name     string
		str      string
		method   api.EventMethodType
		blocking bool
	}{
		{&api.DBResync{KubeState: api.KubeStateData{"node": {"k8s/node/n1": n1}}}, "DB Resync",
			"DB Resync (remote DB, 1 values)", api.FullResync, false},
		{&api.DBResync{Local: true}, "DB Resync", "DB Resync (local DB, 0 values)", api.FullResync, false},
		{&api.KubeStateChange{Key: "k8s/node/n1", Resource: "node", NewValue: n1}, "Kubernetes State Change",
			"Kubernetes State Change (create node k8s/node/n1)", api.Update, false},
		{&api.KubeStateChange{Key: "k8s/node/n1", Resource: "node", PrevValue: n1, NewValue: n1}, "Kubernetes State Change",
			"Kubernetes State Change (update node k8s/node/n1)", api.Update, false},
		{&api.KubeStateChange{Key: "k8s/node/n1", Resource: "node", PrevValue: n1}, "Kubernetes State Change",
			"Kubernetes State Change (delete node k8s/node/n1)", api.Update, false},
		{&api.HealingResync{Type: api.Periodic}, "Healing Resync", "Healing Resync (periodic)", api.DownstreamResync, false},
		{&api.HealingResync{Type: api.AfterError, Error: errors.New("x")}, "Healing Resync",
			"Healing Resync (after error: x)", api.FullResync, false},
		{&api.Shutdown{}, "Shutdown", "Shutdown", api.Update, true},
	}
	for _, c := range cases {
		g.Expect(c.ev.GetName()).To(Equal(c.name))
		g.Expect(c.ev.String()).To(Equal(c.str))
		g.Expect(c.ev.Method()).To(Equal(c.method), c.str)
		g.Expect(c.ev.IsBlocking()).To(Equal(c.blocking), c.str)
		c.ev.Done(nil)
	}
	del := &api.KubeStateChange{Resource: "node", PrevValue: n1}
	g.Expect(del.Direction()).To(Equal(api.Reverse))
	g.Expect((&api.KubeStateChange{NewValue: n1}).Direction()).To(Equal(api.Forward))
	g.Expect(del.TransactionType()).To(Equal(api.BestEffort))
	g.Expect((&api.Shutdown{}).Direction()).To(Equal(api.Reverse))
}

func TestEnumNames(t *testing.T) {
	g := NewWithT(t)
	g.Expect([]string{api.FullResync.String(), api.DownstreamResync.String(), api.UpstreamResync.String(),
		api.Update.String(), api.EventMethodType(9).String()}).
		To(Equal([]string{"FullResync", "DownstreamResync", "UpstreamResync", "Update", "EventMethodType(9)"}))
	g.Expect(api.Update.IsResync()).To(BeFalse())
	g.Expect(api.UpstreamResync.IsResync()).To(BeTrue())
	g.Expect([]string{api.BestEffort.String(), api.BestEffortIgnoreErrors.String(), api.RevertOnFailure.String()}).
		To(Equal([]string{"BestEffort", "BestEffortIgnoreErrors", "RevertOnFailure"}))
	g.Expect(api.Reverse.String() + api.Forward.String()).To(Equal("ReverseForward"))
}

func TestFatalAndAbortAreDistinct(t *testing.T) {
	g := NewWithT(t)
	cause := errors.New("cause")
	fatal := fmt.Errorf("handler x: %w", api.NewFatalError(cause))
	abort := fmt.Errorf("handler x: %w", api.NewAbortEventError(cause))
	g.Expect(api.IsFatal(fatal)).To(BeTrue())
	g.Expect(api.IsAbort(fatal)).To(BeFalse())
	g.Expect(api.IsAbort(abort)).To(BeTrue())
	g.Expect(api.IsFatal(abort)).To(BeFalse(), "the original tested for FatalError twice")
	g.Expect(errors.Is(fatal, cause)).To(BeTrue())
	g.Expect(fatal.Error()).To(Equal("handler x: fatal error: cause"))
	g.Expect(abort.Error()).To(Equal("handler x: event aborted: cause"))
	g.Expect(api.NewFatalError(nil).Error()).To(Equal("fatal error: <nil>"))
}

func TestKubeStateData(t *testing.T) {
	g := NewWithT(t)
	s := api.KubeStateData{}
	s.Apply("node", "k8s/node/a", wrapperspb.String("a"))
	s.Apply("pod", "k8s/pod/p/namespace/d", wrapperspb.String("p"))
	g.Expect(s.Len()).To(Equal(2))
	c := s.Clone()
	s.Apply("node", "k8s/node/a", nil)
	g.Expect(s.Len()).To(Equal(1))
	g.Expect(c.Len()).To(Equal(2), "the clone keeps its own maps")
	g.Expect(proto.Equal(c["node"]["k8s/node/a"], wrapperspb.String("a"))).To(BeTrue())
	s.Apply("nothing", "k", nil) // deleting from a missing resource is fine
}

func TestPutAllDeleteAll(t *testing.T) {
	g := NewWithT(t)
	txn := controllertest.NewTxn()
	vals := api.KeyValuePairs{"a": wrapperspb.Bool(true), "b": wrapperspb.Bool(false)}
	api.PutAll(txn, vals)
	g.Expect(txn.Get("a")).NotTo(BeNil())
	api.DeleteAll(txn, vals)
	g.Expect(txn.Values()).To(HaveKeyWithValue("a", BeNil()))
	g.Expect(txn.Values()).To(HaveKeyWithValue("b", BeNil()))
}
