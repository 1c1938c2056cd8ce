package podmanager_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/engine/ipalloc"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/podmanager"
	"github.com/contiv-ipam/agent/plugins/podmanager/cni"
)

func TestAddRepliesWithTheAddressAndRecordsThePod(t *testing.T) {
	g := NewWithT(t)
	s := startStack(t)

	reply, err := s.client.Add(ctx(t), addRequest("c1", "web"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reply.GetResult()).To(Equal(cni.CNIReply_OK), reply.GetError())
	g.Expect(reply.GetErrorCode()).To(BeZero())
	g.Expect(reply.GetInterfaces()).To(HaveLen(1))
	itf := reply.GetInterfaces()[0]
	g.Expect(itf.GetName()).To(Equal("eth0"))
	g.Expect(itf.GetSandbox()).To(Equal("/var/run/netns/c1"))
	g.Expect(itf.GetIpAddresses()).To(HaveLen(1))
	ip := itf.GetIpAddresses()[0]
	g.Expect(ip.GetVersion()).To(Equal(cni.CNIReply_Interface_IP_IPV4))
	g.Expect(ip.GetAddress()).To(Equal("10.1.5.2/24"))
	g.Expect(ip.GetGateway()).To(Equal("10.1.5.1"))
	g.Expect(reply.GetRoutes()).To(HaveLen(1))
	g.Expect(reply.GetRoutes()[0].GetDst()).To(Equal("0.0.0.0/0"))
	g.Expect(reply.GetRoutes()[0].GetGw()).To(Equal("10.1.5.1"))

	pods := s.pm.GetLocalPods()
	id := podmodel.ID{Name: "web", Namespace: "default"}
	g.Expect(pods).To(HaveKey(id))
	g.Expect(pods[id].ContainerID).To(Equal("c1"))
	g.Expect(pods[id].NetworkNamespace).To(Equal("/var/run/netns/c1"))
	g.Expect(pods[id].Attachments).To(ConsistOf(keyOf("c1")))
	g.Expect(s.reg.counter(t, "contiv_podmanager_requests_total", map[string]string{"method": "add", "code": "0"})).To(Equal(1.0))
	g.Expect(s.reg.histogramCount(t, "contiv_podmanager_request_duration_seconds", map[string]string{"method": "add"})).
		To(Equal(uint64(1)))
}

func TestAddWithoutPodArgumentsRecordsAPlainContainer(t *testing.T) {
	g := NewWithT(t)
	s := startStack(t)

	reply, err := s.client.Add(ctx(t), addRequest("c9", ""))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reply.GetResult()).To(Equal(cni.CNIReply_OK), reply.GetError())
	g.Expect(s.pm.GetLocalPods()).To(HaveKey(podmodel.ID{Name: "c9", Namespace: podmanager.ContainerNamespace}))
}

func TestRepeatedAddReturnsTheSameAddress(t *testing.T) {
	g := NewWithT(t)
	s := startStack(t)

	first, err := s.client.Add(ctx(t), addRequest("c1", "web"))
	g.Expect(err).NotTo(HaveOccurred())
	again, err := s.client.Add(ctx(t), addRequest("c1", "web"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.GetResult()).To(Equal(cni.CNIReply_OK), again.GetError())
	g.Expect(again.GetInterfaces()[0].GetIpAddresses()[0].GetAddress()).
		To(Equal(first.GetInterfaces()[0].GetIpAddresses()[0].GetAddress()))
	g.Expect(s.ipam.calls()).To(Equal([]string{"add " + keyOf("c1").String(), "add " + keyOf("c1").String()}))
	g.Expect(s.pm.GetLocalPods()[podmodel.ID{Name: "web", Namespace: "default"}].Attachments).To(HaveLen(1))
}

func TestBadRequestsNameTheField(t *testing.T) {
	cases := []struct {
		name   string
		change func(r *cni.CNIRequest)
		want   string
	}{
		{"no container ID", func(r *cni.CNIRequest) { r.ContainerId = "" }, "container_id is empty"},
		{"no interface", func(r *cni.CNIRequest) { r.InterfaceName = "" }, "interface_name is empty"},
		{"no network", func(r *cni.CNIRequest) { r.NetworkName = "" }, "network_name is empty"},
		{"malformed pair", func(r *cni.CNIRequest) { r.ExtraArguments = "K8S_POD_NAME=a;garbage" }, `"garbage" is not KEY=VALUE`},
		{"empty key", func(r *cni.CNIRequest) { r.ExtraArguments = "=x" }, `"=x" is not KEY=VALUE`},
		{"name without namespace", func(r *cni.CNIRequest) { r.ExtraArguments = "K8S_POD_NAME=a" }, "without K8S_POD_NAMESPACE"},
		{"namespace without name", func(r *cni.CNIRequest) { r.ExtraArguments = "K8S_POD_NAMESPACE=a" }, "without K8S_POD_NAME"},
	}
	s := startStack(t)
	methods := map[string]func(*cni.CNIRequest) (*cni.CNIReply, error){
		"add":    func(r *cni.CNIRequest) (*cni.CNIReply, error) { return s.client.Add(ctx(t), r) },
		"delete": func(r *cni.CNIRequest) (*cni.CNIReply, error) { return s.client.Delete(ctx(t), r) },
		"check":  func(r *cni.CNIRequest) (*cni.CNIReply, error) { return s.client.Check(ctx(t), r) },
	}
	for _, tc := range cases {
		for method, call := range methods {
			t.Run(tc.name+"/"+method, func(t *testing.T) {
				g := NewWithT(t)
				req := addRequest("c1", "web")
				tc.change(req)
				reply, err := call(req)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(reply.GetResult()).To(Equal(cni.CNIReply_ERROR))
				g.Expect(reply.GetErrorCode()).To(Equal(cni.CodeBadRequest))
				g.Expect(reply.GetError()).To(ContainSubstring(tc.want))
			})
		}
	}
	g := NewWithT(t)
	g.Expect(s.ipam.calls()).To(BeEmpty(), "no bad request reaches the event loop")
	g.Expect(s.reg.counter(t, "contiv_podmanager_requests_total", map[string]string{"method": "add", "code": "102"})).
		To(Equal(float64(len(cases))))
}

func TestHandlerErrorsGetTheirCodes(t *testing.T) {
	cases := []struct {
		name string
		err  error
		code uint32
	}{
		{"not ready", fmt.Errorf("no node ID yet: %w", podmanager.ErrTryAgain), cni.CodeTryAgainLater},
		{"bad IPAM data", fmt.Errorf("ipamData: %w", podmanager.ErrBadRequest), cni.CodeBadRequest},
		{"pool exhausted", fmt.Errorf("pod subnet 10.1.5.0/24: %w", ipalloc.ErrPoolExhausted), cni.CodePoolExhausted},
		{"store failed", errors.New("bolt: disk full"), cni.CodeInternal},
	}
	s := startStack(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s.ipam.set(func(f *fakeIPAM) { f.failAdd = tc.err })
			reply, err := s.client.Add(ctx(t), addRequest("c1", "web"))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(reply.GetResult()).To(Equal(cni.CNIReply_ERROR))
			g.Expect(reply.GetErrorCode()).To(Equal(tc.code))
			g.Expect(reply.GetError()).To(ContainSubstring(tc.err.Error()))
			g.Expect(reply.GetInterfaces()).To(BeEmpty())
		})
	}
}

func TestAFailingLaterHandlerRevertsTheLocalPod(t *testing.T) {
	g := NewWithT(t)
	s := startStack(t)
	s.ipam.set(func(f *fakeIPAM) { f.failAdd = errors.New("ipam failed") })

	reply, err := s.client.Add(ctx(t), addRequest("c1", "web"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reply.GetErrorCode()).To(Equal(cni.CodeInternal))
	g.Expect(s.pm.GetLocalPods()).To(BeEmpty(), "podmanager's Revert dropped the pod")

	// A repeated Add of a recorded key that fails reverts nothing.
	s.ipam.set(func(f *fakeIPAM) { f.failAdd = nil })
	reply, err = s.client.Add(ctx(t), addRequest("c1", "web"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reply.GetResult()).To(Equal(cni.CNIReply_OK), reply.GetError())
	s.ipam.set(func(f *fakeIPAM) { f.failAdd = errors.New("ipam failed again") })
	reply, err = s.client.Add(ctx(t), addRequest("c1", "web"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reply.GetErrorCode()).To(Equal(cni.CodeInternal))
	g.Expect(s.pm.GetLocalPods()).To(HaveKey(podmodel.ID{Name: "web", Namespace: "default"}))
}

func TestObsoletePodConfigurationDeletesTheOldContainerFirst(t *testing.T) {
	g := NewWithT(t)
	s := startStack(t)

	old, err := s.client.Add(ctx(t), addRequest("c1", "web"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(old.GetResult()).To(Equal(cni.CNIReply_OK), old.GetError())
	reply, err := s.client.Add(ctx(t), addRequest("c2", "web"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reply.GetResult()).To(Equal(cni.CNIReply_OK), reply.GetError())

	g.Expect(s.ipam.calls()).To(Equal([]string{
		"add " + keyOf("c1").String(), "delete " + keyOf("c1").String(), "add " + keyOf("c2").String(),
	}))
	lp := s.pm.GetLocalPods()[podmodel.ID{Name: "web", Namespace: "default"}]
	g.Expect(lp).NotTo(BeNil())
	g.Expect(lp.ContainerID).To(Equal("c2"))
	g.Expect(lp.Attachments).To(ConsistOf(keyOf("c2")))
	held, ok, err := s.ipam.AttachmentIPs(keyOf("c1"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeFalse(), "the old container's address %s is released", held)
}

func TestObsoleteContainerThatCannotBeDeletedFailsTheAdd(t *testing.T) {
	g := NewWithT(t)
	s := startStack(t)
	_, err := s.client.Add(ctx(t), addRequest("c1", "web"))
	g.Expect(err).NotTo(HaveOccurred())
	s.ipam.set(func(f *fakeIPAM) { f.pending = func(context.Context) error { return errors.New("fsync failed") } })

	reply, err := s.client.Add(ctx(t), addRequest("c2", "web"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reply.GetErrorCode()).To(Equal(cni.CodeInternal))
	g.Expect(reply.GetError()).To(And(ContainSubstring(`obsolete container "c1"`), ContainSubstring("fsync failed")))
	g.Expect(s.ipam.calls()).NotTo(ContainElement("add "+keyOf("c2").String()), "no AddPod after a failed delete")
}

func TestDelete(t *testing.T) {
	g := NewWithT(t)
	s := startStack(t)
	_, err := s.client.Add(ctx(t), addRequest("c1", "web"))
	g.Expect(err).NotTo(HaveOccurred())

	// An old container's DEL leaves the current one alone.
	reply, err := s.client.Delete(ctx(t), addRequest("c0", "web"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reply.GetResult()).To(Equal(cni.CNIReply_OK), reply.GetError())
	g.Expect(s.pm.GetLocalPods()).To(HaveKey(podmodel.ID{Name: "web", Namespace: "default"}))

	reply, err = s.client.Delete(ctx(t), addRequest("c1", "web"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reply.GetResult()).To(Equal(cni.CNIReply_OK), reply.GetError())
	g.Expect(s.pm.GetLocalPods()).To(BeEmpty())

	// An unknown key is OK.
	reply, err = s.client.Delete(ctx(t), addRequest("c1", "web"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reply.GetResult()).To(Equal(cni.CNIReply_OK), reply.GetError())
	g.Expect(s.ipam.calls()).To(Equal([]string{
		"add " + keyOf("c1").String(), "delete " + keyOf("c0").String(),
		"delete " + keyOf("c1").String(), "delete " + keyOf("c1").String(),
	}))
}

func TestAChangeThatIsNotDurableIsAnError(t *testing.T) {
	for _, method := range []string{"add", "delete", "gc"} {
		t.Run(method, func(t *testing.T) {
			g := NewWithT(t)
			s := startStack(t)
			s.ipam.set(func(f *fakeIPAM) {
				f.pending = func(context.Context) error { return errors.New("bolt: fsync failed") }
			})
			var reply *cni.CNIReply
			var err error
			switch method {
			case "add":
				reply, err = s.client.Add(ctx(t), addRequest("c1", "web"))
			case "delete":
				reply, err = s.client.Delete(ctx(t), addRequest("c1", "web"))
			case "gc":
				reply, err = s.client.GC(ctx(t), &cni.GCRequest{NetworkName: "k8s-pod-network"})
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(reply.GetResult()).To(Equal(cni.CNIReply_ERROR))
			g.Expect(reply.GetErrorCode()).To(Equal(cni.CodeInternal))
			g.Expect(reply.GetError()).To(And(ContainSubstring("not durable"), ContainSubstring("fsync failed")))
			g.Expect(reply.GetInterfaces()).To(BeEmpty())
		})
	}
}

func TestCheck(t *testing.T) {
	g := NewWithT(t)
	s := startStack(t)
	_, err := s.client.Add(ctx(t), addRequest("c1", "web")) // 10.1.5.2/24
	g.Expect(err).NotTo(HaveOccurred())

	cases := []struct {
		name      string
		container string
		prev      []string
		code      uint32
		want      string
	}{
		{"held", "c1", nil, 0, ""},
		{"held, prevResult agrees", "c1", []string{"10.1.5.2/24"}, 0, ""},
		{"prefix length ignored", "c1", []string{"10.1.5.2/32"}, 0, ""},
		{"bare address", "c1", []string{"10.1.5.9/24", "10.1.5.2"}, 0, ""},
		{"no allocation", "c7", nil, cni.CodeCheckFailed, "no allocation for k8s-pod-network/c7/eth0"},
		{"another address", "c1", []string{"10.1.5.3/24"}, cni.CodeCheckFailed, "holds 10.1.5.2, prevResult has [10.1.5.3/24]"},
		{"bad prev_ips", "c1", []string{"ten"}, cni.CodeBadRequest, `prev_ips[0] "ten"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			req := addRequest(tc.container, "web")
			req.PrevIps = tc.prev
			reply, err := s.client.Check(ctx(t), req)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(reply.GetErrorCode()).To(Equal(tc.code), reply.GetError())
			g.Expect(reply.GetError()).To(ContainSubstring(tc.want))
		})
	}
	t.Run("IPAM fails", func(t *testing.T) {
		g := NewWithT(t)
		s.ipam.set(func(f *fakeIPAM) { f.ipErr = fmt.Errorf("no pod subnet: %w", podmanager.ErrTryAgain) })
		reply, err := s.client.Check(ctx(t), addRequest("c1", "web"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(reply.GetErrorCode()).To(Equal(cni.CodeTryAgainLater))
		g.Expect(reply.GetError()).To(ContainSubstring("no pod subnet"))
	})
}

func TestGC(t *testing.T) {
	g := NewWithT(t)
	s := startStack(t)
	for _, c := range []string{"c1", "c2", "c3"} {
		_, err := s.client.Add(ctx(t), addRequest(c, "pod-"+c))
		g.Expect(err).NotTo(HaveOccurred())
	}
	reply, err := s.client.GC(ctx(t), &cni.GCRequest{NetworkName: "k8s-pod-network", ValidAttachments: []*cni.Attachment{
		{ContainerId: "c2", InterfaceName: "eth0"},
	}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reply.GetResult()).To(Equal(cni.CNIReply_OK), reply.GetError())
	g.Expect(s.ipam.calls()).To(ContainElement("gc k8s-pod-network"))
	g.Expect(s.pm.GetLocalPods()).To(HaveLen(1))
	g.Expect(s.pm.GetLocalPods()).To(HaveKey(podmodel.ID{Name: "pod-c2", Namespace: "default"}))
	_, ok, _ := s.ipam.AttachmentIPs(keyOf("c1"))
	g.Expect(ok).To(BeFalse())

	for name, req := range map[string]*cni.GCRequest{
		"network_name is empty": {},
		"valid_attachments[1]": {NetworkName: "n", ValidAttachments: []*cni.Attachment{
			{ContainerId: "a", InterfaceName: "eth0"}, {ContainerId: "", InterfaceName: "eth0"},
		}},
	} {
		reply, err := s.client.GC(ctx(t), req)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(reply.GetErrorCode()).To(Equal(cni.CodeBadRequest))
		g.Expect(reply.GetError()).To(ContainSubstring(name))
	}
}

func TestStatus(t *testing.T) {
	g := NewWithT(t)
	s := startStack(t)
	reply, err := s.client.Status(ctx(t), &cni.StatusRequest{NetworkName: "k8s-pod-network"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reply.GetResult()).To(Equal(cni.CNIReply_OK), reply.GetError())

	zero := uint64(0)
	s.ipam.set(func(f *fakeIPAM) { f.free = &zero })
	reply, err = s.client.Status(ctx(t), &cni.StatusRequest{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reply.GetErrorCode()).To(Equal(cni.CodeNotAvailable))
	g.Expect(reply.GetError()).To(ContainSubstring("no IP address is free in the pod subnet"))

	s.ipam.set(func(f *fakeIPAM) { f.freeErr = fmt.Errorf("no node ID yet: %w", podmanager.ErrTryAgain) })
	reply, err = s.client.Status(ctx(t), &cni.StatusRequest{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reply.GetErrorCode()).To(Equal(cni.CodeNotAvailable))
	g.Expect(reply.GetError()).To(ContainSubstring("no node ID yet"))
}

// TestConcurrentAddsOfOnePodWithTwoContainers: both Adds pass the obsolete
// check before either is recorded (the loop is busy); the loop records the
// first, podmanager's Update refuses the second as obsolete, and the
// second Add deletes the first container and adds again.
func TestConcurrentAddsOfOnePodWithTwoContainers(t *testing.T) {
	g := NewWithT(t)
	s := startStack(t)
	busy, resume := make(chan struct{}), make(chan struct{})
	s.ipam.set(func(f *fakeIPAM) {
		f.onUpdate = func(ev api.Event) {
			if add, ok := ev.(*podmanager.AddPod); ok && add.Key.ContainerID == "blocker" {
				close(busy)
				<-resume
			}
		}
	})
	done := make(chan *cni.CNIReply, 3)
	add := func(c, pod string) {
		reply, err := s.client.Add(context.Background(), addRequest(c, pod))
		if err != nil {
			reply = &cni.CNIReply{Result: cni.CNIReply_ERROR, Error: err.Error()}
		}
		done <- reply
	}
	go add("blocker", "other")
	<-busy // the loop is inside the blocker's AddPod
	go add("c1", "web")
	go add("c2", "web")
	g.Eventually(func() float64 { return s.reg.gauge(t, "contiv_controller_event_queue_length") }, 10*time.Second).
		Should(Equal(2.0), "both AddPods of web wait in the queue")
	close(resume)
	for range 3 {
		reply := <-done
		g.Expect(reply.GetResult()).To(Equal(cni.CNIReply_OK), reply.GetError())
	}

	calls := s.ipam.calls()
	g.Expect(calls).To(HaveLen(4))
	g.Expect(calls[0]).To(Equal("add " + keyOf("blocker").String()))
	first := calls[1][len("add "):]
	g.Expect(calls[1]).To(HavePrefix("add "))
	g.Expect(calls[2]).To(Equal("delete "+first), "the first container is deleted")
	g.Expect(calls[3]).To(HavePrefix("add "))
	g.Expect(calls[3]).NotTo(Equal(calls[1]))
	lp := s.pm.GetLocalPods()[podmodel.ID{Name: "web", Namespace: "default"}]
	g.Expect(lp).NotTo(BeNil())
	g.Expect("add "+lp.Attachments[0].String()).To(Equal(calls[3]), "the second container is the pod's")
}

// TestAddRefusesNamesTheCNISpecForbids: Add checks the names a key is made
// of; Delete of such a key is OK (it holds nothing).
func TestAddRefusesNamesTheCNISpecForbids(t *testing.T) {
	g := NewWithT(t)
	s := startStack(t)
	req := addRequest("c1", "web")
	req.InterfaceName = "eth0:1"
	reply, err := s.client.Add(ctx(t), req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reply.GetErrorCode()).To(Equal(cni.CodeBadRequest))
	g.Expect(reply.GetError()).To(ContainSubstring(`interface_name "eth0:1"`))
	reply, err = s.client.Delete(ctx(t), req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reply.GetResult()).To(Equal(cni.CNIReply_OK), reply.GetError())
	g.Expect(s.ipam.calls()).To(Equal([]string{"delete k8s-pod-network/c1/eth0:1"}))
}

func TestCheckAndStatusWithoutIPAM(t *testing.T) {
	g := NewWithT(t)
	s := startStack(t, func(o *stackOpts) { o.noIPAM = true })
	reply, err := s.client.Check(ctx(t), addRequest("c1", "web"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reply.GetErrorCode()).To(Equal(cni.CodeInternal))
	g.Expect(reply.GetError()).To(ContainSubstring("no IPAM"))
	reply, err = s.client.Status(ctx(t), &cni.StatusRequest{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reply.GetErrorCode()).To(Equal(cni.CodeNotAvailable))
	g.Expect(reply.GetError()).To(ContainSubstring("no IPAM"))
}
