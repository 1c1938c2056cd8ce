package podmanager

import (
	"testing"

	. "github.com/onsi/gomega"

	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

var web = podmodel.ID{Name: "web", Namespace: "default"}

func addEv(pod podmodel.ID, container, ifname string) *AddPod {
	ev := NewAddPod()
	ev.Pod, ev.Key, ev.NetworkNamespace = pod, AttachmentKey{"net", container, ifname}, "/ns/"+container
	return ev
}

func TestPodTable(t *testing.T) {
	g := NewWithT(t)
	tab := newPodTable()

	first := addEv(web, "c1", "eth0")
	g.Expect(tab.addPod(first)).To(Succeed())
	second := addEv(web, "c1", "eth1")
	g.Expect(tab.addPod(second)).To(Succeed())
	g.Expect(tab.snapshot()[web].Attachments).To(Equal([]AttachmentKey{{"net", "c1", "eth0"}, {"net", "c1", "eth1"}}))

	// Another container of the same pod is the obsolete configuration.
	err := tab.addPod(addEv(web, "c2", "eth0"))
	g.Expect(err).To(MatchError(errObsoletePod))
	g.Expect(err).To(MatchError(ContainSubstring(`pod default/web is connected with container "c1", the call names container "c2"`)))

	// Revert undoes only the last AddPod, and only what it changed.
	tab.revertAdd(first) // not the last one: nothing
	g.Expect(tab.snapshot()[web].Attachments).To(HaveLen(2))
	repeated := addEv(web, "c1", "eth1")
	g.Expect(tab.addPod(repeated)).To(Succeed())
	tab.revertAdd(repeated) // changed nothing: reverts nothing
	g.Expect(tab.snapshot()[web].Attachments).To(HaveLen(2))
	third := addEv(web, "c1", "eth2")
	g.Expect(tab.addPod(third)).To(Succeed())
	tab.revertAdd(third)
	g.Expect(tab.snapshot()[web].Attachments).To(HaveLen(2))

	// A DEL of another container leaves the pod alone.
	tab.deletePod(web, AttachmentKey{"net", "c0", "eth0"})
	g.Expect(tab.snapshot()[web].Attachments).To(HaveLen(2))
	tab.deletePod(web, AttachmentKey{"net", "c1", "eth0"})
	g.Expect(tab.snapshot()[web].Attachments).To(Equal([]AttachmentKey{{"net", "c1", "eth1"}}))

	// Copies: changing a snapshot changes nothing inside.
	snap := tab.snapshot()
	snap[web].Attachments[0].IfName = "changed"
	lp, ok := tab.get(web)
	g.Expect(ok).To(BeTrue())
	g.Expect(lp.Attachments[0].IfName).To(Equal("eth1"))

	tab.deletePod(web, AttachmentKey{"net", "c1", "eth1"})
	g.Expect(tab.snapshot()).To(BeEmpty(), "a pod without attachments is forgotten")
	newPod := addEv(web, "c3", "eth0")
	g.Expect(tab.addPod(newPod)).To(Succeed())
	tab.revertAdd(newPod)
	g.Expect(tab.snapshot()).To(BeEmpty(), "a reverted new pod is forgotten")
}

func TestPodTableGC(t *testing.T) {
	g := NewWithT(t)
	tab := newPodTable()
	other := podmodel.ID{Name: "db", Namespace: "default"}
	g.Expect(tab.addPod(addEv(web, "c1", "eth0"))).To(Succeed())
	g.Expect(tab.addPod(addEv(other, "c2", "eth0"))).To(Succeed())
	ev := addEv(other, "c2", "eth1")
	ev.Key.Network = "other-net"
	g.Expect(tab.addPod(ev)).To(Succeed())

	tab.gc("net", []AttachmentKey{{"net", "c1", "eth0"}})
	pods := tab.snapshot()
	g.Expect(pods[web].Attachments).To(HaveLen(1))
	g.Expect(pods[other].Attachments).To(Equal([]AttachmentKey{{"other-net", "c2", "eth1"}}), "other networks are untouched")
	tab.gc("other-net", nil)
	g.Expect(tab.snapshot()).To(HaveLen(1))
}
