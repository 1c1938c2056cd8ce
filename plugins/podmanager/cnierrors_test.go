package podmanager_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/podmanager"
	"github.com/contiv-ipam/agent/plugins/podmanager/cni"
)

// observingIPAM is the fake IPAM that also hears failed ADDs and DELs.
type observingIPAM struct {
	*fakeIPAM
	failures chan podmanager.CNIFailure
}

var _ podmanager.FailureObserver = (*observingIPAM)(nil)

func (o *observingIPAM) CNIFailed(f podmanager.CNIFailure) { o.failures <- f }

func TestFailedAddsAndDeletesAreToldToAFailureObserver(t *testing.T) {
	g := NewWithT(t)
	obs := make(chan podmanager.CNIFailure, 10)
	s := startStack(t, func(o *stackOpts) {
		o.wrapIPAM = func(f *fakeIPAM) podmanager.IPAM { return &observingIPAM{fakeIPAM: f, failures: obs} }
	})
	before := time.Now()

	reply, err := s.client.Add(ctx(t), addRequest("c1", "web"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reply.GetResult()).To(Equal(cni.CNIReply_OK))
	g.Expect(obs).NotTo(Receive(), "a successful ADD is no failure")

	s.ipam.set(func(f *fakeIPAM) { f.failAdd = fmt.Errorf("no room: %w", errors.New("pool <b>full</b>")) })
	reply, err = s.client.Add(ctx(t), addRequest("c2", "db"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reply.GetResult()).To(Equal(cni.CNIReply_ERROR))
	var f podmanager.CNIFailure
	g.Expect(obs).To(Receive(&f))
	g.Expect(f.Method).To(Equal("add"))
	g.Expect(f.Pod).To(Equal("default/db"))
	g.Expect(f.ContainerID).To(Equal("c2"))
	g.Expect(f.IfName).To(Equal("eth0"))
	g.Expect(f.Code).To(Equal(reply.GetErrorCode()))
	g.Expect(f.Message).To(Equal(reply.GetError()))
	g.Expect(f.Message).To(ContainSubstring("pool <b>full</b>"))
	g.Expect(f.Time).To(BeTemporally(">=", before))

	s.ipam.set(func(f *fakeIPAM) { f.failDel = errors.New("store down") })
	reply, err = s.client.Delete(ctx(t), addRequest("c1", "web"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reply.GetResult()).To(Equal(cni.CNIReply_ERROR))
	g.Expect(obs).To(Receive(&f))
	g.Expect(f.Method).To(Equal("delete"))
	g.Expect(f.Pod).To(Equal("default/web"))

	bad := addRequest("c3", "")
	bad.ExtraArguments = "K8S_POD_NAME=lonely"
	reply, err = s.client.Add(ctx(t), bad)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reply.GetErrorCode()).To(Equal(uint32(cni.CodeBadRequest)))
	g.Expect(obs).To(Receive(&f))
	g.Expect(f.Pod).To(BeEmpty(), "unreadable pod arguments name no pod")
	g.Expect(f.ContainerID).To(Equal("c3"))

	_, err = s.client.Check(ctx(t), addRequest("c9", "nobody"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(obs).NotTo(Receive(), "only ADD and DEL are told")
}
