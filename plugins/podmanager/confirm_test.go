package podmanager_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/podmanager"
	"github.com/contiv-ipam/agent/plugins/podmanager/cni"
)

// confirmRequest confirms reservation for the key of addRequest(c, ...).
func confirmRequest(c, reservation string) *cni.ConfirmRequest {
	return &cni.ConfirmRequest{
		Version: "1.1.0", ContainerId: c, InterfaceName: "eth0", NetworkName: "k8s-pod-network",
		Reservation: reservation,
	}
}

// confirmingAdd is addRequest from a client that confirms reservations.
func confirmingAdd(c, pod string) *cni.CNIRequest {
	req := addRequest(c, pod)
	req.Confirms = true
	return req
}

// TestAddRepliesWithTheReservation: the request's confirms is the
// AddPod's Confirms, and the AddPod's Reservation is the reply's; an IPAM
// that made none (no reservations, or a client that does not confirm)
// gives an empty one: nothing to confirm.
func TestAddRepliesWithTheReservation(t *testing.T) {
	g := NewWithT(t)
	s := startStack(t)
	var mu sync.Mutex
	var confirms []bool // the AddPods' Confirms
	s.ipam.set(func(f *fakeIPAM) {
		f.onUpdate = func(ev api.Event) {
			if add, ok := ev.(*podmanager.AddPod); ok {
				mu.Lock()
				confirms = append(confirms, add.Confirms)
				mu.Unlock()
			}
		}
	})

	reply, err := s.client.Add(ctx(t), confirmingAdd("c0", "old"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reply.GetResult()).To(Equal(cni.CNIReply_OK), reply.GetError())
	g.Expect(reply.GetReservation()).To(BeEmpty(), "IPAM made no reservation")

	s.ipam.set(func(f *fakeIPAM) { f.reserve = true })
	reply, err = s.client.Add(ctx(t), addRequest("c1", "web"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reply.GetResult()).To(Equal(cni.CNIReply_OK), reply.GetError())
	g.Expect(reply.GetReservation()).To(BeEmpty(), "a client that does not confirm gets no reservation")

	reply, err = s.client.Add(ctx(t), confirmingAdd("c2", "db"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reply.GetResult()).To(Equal(cni.CNIReply_OK), reply.GetError())
	g.Expect(reply.GetReservation()).To(Equal("res-1"))
	g.Expect(reply.GetInterfaces()[0].GetIpAddresses()[0].GetAddress()).To(Equal("10.1.5.4/24"))
	mu.Lock()
	defer mu.Unlock()
	g.Expect(confirms).To(Equal([]bool{true, false, true}))
}

func TestConfirm(t *testing.T) {
	g := NewWithT(t)
	s := startStack(t)
	s.ipam.set(func(f *fakeIPAM) { f.reserve = true })
	add := func(c string) string {
		reply, err := s.client.Add(ctx(t), confirmingAdd(c, "pod-"+c))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(reply.GetResult()).To(Equal(cni.CNIReply_OK), reply.GetError())
		return reply.GetReservation()
	}

	t.Run("the key's reservation", func(t *testing.T) {
		g := NewWithT(t)
		res := add("c1")
		reply, err := s.client.Confirm(ctx(t), confirmRequest("c1", res))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(reply.GetResult()).To(Equal(cni.CNIReply_OK), reply.GetError())
		g.Expect(reply.GetErrorCode()).To(BeZero())
		g.Expect(s.ipam.isConfirmed(keyOf("c1"))).To(BeTrue())
		g.Expect(s.ipam.calls()).To(ContainElement("confirm " + keyOf("c1").String() + " " + res))
		g.Expect(s.reg.counter(t, "contiv_podmanager_requests_total", map[string]string{"method": "confirm", "code": "0"})).
			To(Equal(1.0))
		g.Expect(s.reg.histogramCount(t, "contiv_podmanager_request_duration_seconds", map[string]string{"method": "confirm"})).
			To(Equal(uint64(1)))
	})

	mismatches := []struct {
		name        string
		container   string
		reservation func() string
	}{
		{"another reservation", "c2", func() string { add("c2"); return "res-999" }},
		{"replaced by a later Add", "c3", func() string { first := add("c3"); add("c3"); return first }},
		{"a key without an address", "c4", func() string { return "res-1" }},
	}
	for _, tc := range mismatches {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			res := tc.reservation()
			reply, err := s.client.Confirm(ctx(t), confirmRequest(tc.container, res))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(reply.GetResult()).To(Equal(cni.CNIReply_ERROR))
			g.Expect(reply.GetErrorCode()).To(Equal(cni.CodeBadRequest))
			g.Expect(reply.GetError()).To(And(HavePrefix("confirm: "), ContainSubstring(fmt.Sprintf("%q", res)),
				ContainSubstring(keyOf(tc.container).String())))
			g.Expect(s.ipam.isConfirmed(keyOf(tc.container))).To(BeFalse())
		})
	}

	ipamErrors := []struct {
		name string
		err  error
		code uint32
	}{
		{"not ready", fmt.Errorf("no pod subnet yet: %w", podmanager.ErrTryAgain), cni.CodeTryAgainLater},
		{"store failed", errors.New("bolt: disk full"), cni.CodeInternal},
	}
	for _, tc := range ipamErrors {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			res := add("c5")
			s.ipam.set(func(f *fakeIPAM) { f.confirmErr = tc.err })
			defer s.ipam.set(func(f *fakeIPAM) { f.confirmErr = nil })
			reply, err := s.client.Confirm(ctx(t), confirmRequest("c5", res))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(reply.GetErrorCode()).To(Equal(tc.code))
			g.Expect(reply.GetError()).To(ContainSubstring(tc.err.Error()))
		})
	}
}

// TestConfirmBadRequestsNameTheField: the key is checked as Delete and
// Check check it, and the reservation must be set; nothing reaches IPAM.
func TestConfirmBadRequestsNameTheField(t *testing.T) {
	cases := []struct {
		name   string
		change func(r *cni.ConfirmRequest)
		want   string
	}{
		{"no container ID", func(r *cni.ConfirmRequest) { r.ContainerId = "" }, "container_id is empty"},
		{"no interface", func(r *cni.ConfirmRequest) { r.InterfaceName = "" }, "interface_name is empty"},
		{"no network", func(r *cni.ConfirmRequest) { r.NetworkName = "" }, "network_name is empty"},
		{"no reservation", func(r *cni.ConfirmRequest) { r.Reservation = "" }, "reservation is empty"},
	}
	s := startStack(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			req := confirmRequest("c1", "res-1")
			tc.change(req)
			reply, err := s.client.Confirm(ctx(t), req)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(reply.GetResult()).To(Equal(cni.CNIReply_ERROR))
			g.Expect(reply.GetErrorCode()).To(Equal(cni.CodeBadRequest))
			g.Expect(reply.GetError()).To(ContainSubstring(tc.want))
		})
	}
	g := NewWithT(t)
	g.Expect(s.ipam.calls()).To(BeEmpty(), "no bad request reaches IPAM")
	g.Expect(s.reg.counter(t, "contiv_podmanager_requests_total", map[string]string{"method": "confirm", "code": "102"})).
		To(Equal(float64(len(cases))))
}

// TestConfirmRunsUnderTheCallsContext: IPAM's ConfirmAttachment gets the
// call's context: it ends when the client gives up, after requestTimeout
// (code 11) and when the agent stops (code 11).
func TestConfirmRunsUnderTheCallsContext(t *testing.T) {
	// blockConfirm makes ConfirmAttachment wait for its context and
	// report the cause it saw.
	blockConfirm := func(s *stack) (entered <-chan struct{}, ended <-chan error) {
		in, out := make(chan struct{}, 1), make(chan error, 1)
		s.ipam.set(func(f *fakeIPAM) {
			f.onConfirm = func(ctx context.Context) error {
				in <- struct{}{}
				<-ctx.Done()
				out <- context.Cause(ctx)
				return ctx.Err()
			}
		})
		return in, out
	}

	t.Run("the client cancels", func(t *testing.T) {
		g := NewWithT(t)
		s := startStack(t)
		entered, ended := blockConfirm(s)
		callCtx, cancel := context.WithCancel(ctx(t))
		errs := make(chan error, 1)
		go func() {
			_, err := s.client.Confirm(callCtx, confirmRequest("c1", "res-1"))
			errs <- err
		}()
		<-entered
		cancel()
		g.Expect(status.Code(<-errs)).To(Equal(codes.Canceled))
		g.Eventually(ended, 10*time.Second).Should(Receive(MatchError(context.Canceled)),
			"IPAM's call ends with the client's")
	})

	t.Run("requestTimeout", func(t *testing.T) {
		g := NewWithT(t)
		s := startStack(t, func(o *stackOpts) { o.conf.RequestTimeout = 200 * time.Millisecond })
		_, ended := blockConfirm(s)
		reply, err := s.client.Confirm(ctx(t), confirmRequest("c1", "res-1"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(reply.GetErrorCode()).To(Equal(cni.CodeTryAgainLater))
		g.Expect(reply.GetError()).To(ContainSubstring("the agent did not answer within 200ms (requestTimeout)"))
		g.Expect(<-ended).To(MatchError(ContainSubstring("requestTimeout")))
		g.Expect(s.reg.counter(t, "contiv_podmanager_requests_total", map[string]string{"method": "confirm", "code": "11"})).
			To(Equal(1.0))
	})

	t.Run("the agent stops", func(t *testing.T) {
		g := NewWithT(t)
		s := startStack(t)
		entered, _ := blockConfirm(s)
		replies := make(chan *cni.CNIReply, 1)
		go func() {
			reply, err := s.client.Confirm(context.Background(), confirmRequest("c1", "res-1"))
			if err != nil {
				reply = &cni.CNIReply{Result: cni.CNIReply_ERROR, Error: err.Error()}
			}
			replies <- reply
		}()
		<-entered
		g.Expect(s.stop()).To(Succeed())
		reply := <-replies
		g.Expect(reply.GetErrorCode()).To(Equal(cni.CodeTryAgainLater), reply.GetError())
		g.Expect(reply.GetError()).To(ContainSubstring("shutting down"))
	})
}

func TestConfirmWithoutIPAM(t *testing.T) {
	g := NewWithT(t)
	s := startStack(t, func(o *stackOpts) { o.noIPAM = true })
	reply, err := s.client.Confirm(ctx(t), confirmRequest("c1", "res-1"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reply.GetResult()).To(Equal(cni.CNIReply_ERROR))
	g.Expect(reply.GetErrorCode()).To(Equal(cni.CodeInternal))
	g.Expect(reply.GetError()).To(ContainSubstring("no IPAM to confirm reservations with"))
}
