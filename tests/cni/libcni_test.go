package cni

import (
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/podmanager"
	"github.com/contiv-ipam/agent/tests/testenv"
)

// TestLibCNI drives contiv-cni as the network plugin of a conflist through
// libcni, the library container runtimes use, on one agent: the CNI
// sequence in every version, GC and STATUS (1.1.0), VERSION, validation,
// and the pod identity taken from CNI_ARGS.
func TestLibCNI(t *testing.T) {
	n := startNode(t, testenv.Options{})
	for _, v := range versions {
		t.Run("sequence/"+v, func(t *testing.T) { n.sequence(t, v) })
	}
	t.Run("podArgs", n.podArgs)
	t.Run("GC", n.gc)
	t.Run("STATUS", func(t *testing.T) {
		g := NewWithT(t)
		rt := newRuntime(t)
		g.Expect(rt.GetStatusNetworkList(ctxT(t), conflist(t, "1.1.0", uniqueName("status"), pluginMode(n.agent.Socket)))).To(Succeed())
	})
	t.Run("VERSION", func(t *testing.T) {
		g := NewWithT(t)
		info, err := newRuntime(t).GetVersionInfo(ctxT(t), "contiv-cni")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(info.SupportedVersions()).To(ContainElements(versions))
	})
	t.Run("Validate", func(t *testing.T) {
		rt := newRuntime(t)
		for _, v := range versions {
			_, err := rt.ValidateNetworkList(ctxT(t), conflist(t, v, "validate", pluginMode(n.agent.Socket)))
			NewWithT(t).Expect(err).NotTo(HaveOccurred(), "cniVersion %s", v)
		}
		_, err := rt.ValidateNetworkList(ctxT(t), conflist(t, "0.2.0", "validate", pluginMode(n.agent.Socket)))
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring(`does not support config version "0.2.0"`)))
	})
}

// sequence is ADD, ADD again, CHECK, the allocation removed behind the
// runtime's back, CHECK, DEL, DEL again, DEL of an unknown container.
func (n *node) sequence(t *testing.T, version string) {
	g := NewWithT(t)
	ctx, rt, other := ctxT(t), newRuntime(t), newRuntime(t)
	name := uniqueName("seq")
	list := conflist(t, version, name, pluginMode(n.agent.Socket))
	att := attachment(t, "ctr")

	res, err := rt.AddNetworkList(ctx, list, att)
	g.Expect(err).NotTo(HaveOccurred(), "ADD")
	addr := n.checkPluginResult(t, g, version, att, res)

	res, err = rt.AddNetworkList(ctx, list, att)
	g.Expect(err).NotTo(HaveOccurred(), "repeated ADD")
	g.Expect(n.checkPluginResult(t, g, version, att, res)).To(Equal(addr), "repeated ADD, same key")

	held, ok := n.allocationOf(t, name, att)
	g.Expect(ok).To(BeTrue(), "allocation of %s in %v", att.ContainerID, n.allocations(t))
	g.Expect(held.Addr()).To(Equal(addr.Addr().String()))
	g.Expect(held.PodID.Namespace).To(Equal(podmanager.ContainerNamespace), "a plain container's pod")
	g.Expect(held.PodID.Name).To(Equal(att.ContainerID))

	if version == "0.3.1" {
		g.Expect(rt.CheckNetworkList(ctx, list, att)).To(MatchError(libcni.ErrorCheckNotSupp))
	} else {
		g.Expect(rt.CheckNetworkList(ctx, list, att)).To(Succeed(), "CHECK after ADD")
	}

	// Another runtime, blind to the first one's cache, deletes the
	// attachment: the agent releases it, the first runtime's CHECK fails.
	g.Expect(other.DelNetworkList(ctx, list, att)).To(Succeed(), "DEL")
	_, ok = n.allocationOf(t, name, att)
	g.Expect(ok).To(BeFalse(), "allocation after DEL")
	if version != "0.3.1" {
		e := expectCode(g, rt.CheckNetworkList(ctx, list, att), uint(103))
		g.Expect(e.Msg).To(ContainSubstring(att.ContainerID), "CHECK error names the key")
	}

	g.Expect(rt.DelNetworkList(ctx, list, att)).To(Succeed(), "DEL of a released key")
	g.Expect(rt.DelNetworkList(ctx, list, att)).To(Succeed(), "DEL again")
	g.Expect(rt.DelNetworkList(ctx, list, attachment(t, "never-added"))).To(Succeed(), "DEL of an unknown key")
	g.Expect(n.inNetwork(t, name)).To(BeEmpty())
}

// podArgs: K8S_POD_NAME and K8S_POD_NAMESPACE in CNI_ARGS name the pod of
// the allocation; a plain container next to it gets an address too.
func (n *node) podArgs(t *testing.T) {
	g := NewWithT(t)
	ctx, rt := ctxT(t), newRuntime(t)
	name := uniqueName("pods")
	list := conflist(t, "1.0.0", name, pluginMode(n.agent.Socket))
	pod := attachment(t, "sandbox")
	pod.Args = podArgs("shop", "web-0", pod.ContainerID)
	plain := attachment(t, "plain")

	res, err := rt.AddNetworkList(ctx, list, pod)
	g.Expect(err).NotTo(HaveOccurred(), "ADD pod")
	podAddr := n.checkPluginResult(t, g, "1.0.0", pod, res)
	res, err = rt.AddNetworkList(ctx, list, plain)
	g.Expect(err).NotTo(HaveOccurred(), "ADD plain container")
	plainAddr := n.checkPluginResult(t, g, "1.0.0", plain, res)
	g.Expect(plainAddr).NotTo(Equal(podAddr))

	a, ok := n.allocationOf(t, name, pod)
	g.Expect(ok).To(BeTrue())
	g.Expect(a.PodID.Namespace).To(Equal("shop"))
	g.Expect(a.PodID.Name).To(Equal("web-0"))
	g.Expect(a.Addr()).To(Equal(podAddr.Addr().String()))
	a, ok = n.allocationOf(t, name, plain)
	g.Expect(ok).To(BeTrue())
	g.Expect(a.PodID.Namespace).To(Equal(podmanager.ContainerNamespace))
	g.Expect(a.PodID.Name).To(Equal(plain.ContainerID))

	g.Expect(rt.DelNetworkList(ctx, list, pod)).To(Succeed())
	g.Expect(rt.DelNetworkList(ctx, list, plain)).To(Succeed())
	g.Expect(n.inNetwork(t, name)).To(BeEmpty())
}

// gc: GC with valid attachments releases the network's other allocations
// (one the runtime's cache does not know, so that the agent's GC is what
// releases it, not libcni's DEL of stale cache entries) and leaves other
// networks alone.
func (n *node) gc(t *testing.T) {
	g := NewWithT(t)
	ctx, rt, other := ctxT(t), newRuntime(t), newRuntime(t)
	name, otherName := uniqueName("gc"), uniqueName("gc-other")
	list := conflist(t, "1.1.0", name, pluginMode(n.agent.Socket))
	otherList := conflist(t, "1.1.0", otherName, pluginMode(n.agent.Socket))
	keep, orphan, elsewhere := attachment(t, "keep"), attachment(t, "orphan"), attachment(t, "elsewhere")

	for _, c := range []struct {
		rt   *libcni.CNIConfig
		list *libcni.NetworkConfigList
		att  *libcni.RuntimeConf
	}{{rt, list, keep}, {other, list, orphan}, {rt, otherList, elsewhere}} {
		_, err := c.rt.AddNetworkList(ctx, c.list, c.att)
		g.Expect(err).NotTo(HaveOccurred(), "ADD %s", c.att.ContainerID)
	}
	g.Expect(n.inNetwork(t, name)).To(HaveLen(2))

	valid := &libcni.GCArgs{ValidAttachments: []types.GCAttachment{{ContainerID: keep.ContainerID, IfName: keep.IfName}}}
	g.Expect(rt.GCNetworkList(ctx, list, valid)).To(Succeed(), "GC")

	left := n.inNetwork(t, name)
	g.Expect(left).To(HaveLen(1), "allocations after GC: %v", left)
	g.Expect(left[0].ContainerID).To(Equal(keep.ContainerID))
	_, ok := n.allocationOf(t, otherName, elsewhere)
	g.Expect(ok).To(BeTrue(), "GC of %s released an allocation of %s", name, otherName)
	g.Expect(rt.CheckNetworkList(ctx, list, keep)).To(Succeed(), "CHECK of the kept attachment")

	g.Expect(rt.DelNetworkList(ctx, list, keep)).To(Succeed())
	g.Expect(rt.DelNetworkList(ctx, otherList, elsewhere)).To(Succeed())
}
