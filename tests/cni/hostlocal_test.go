package cni

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/libcni"
	. "github.com/onsi/gomega"

	cnicodes "github.com/contiv-ipam/agent/plugins/podmanager/cni"
	"github.com/contiv-ipam/agent/tests/testenv"
)

// hostLocalCode is the code Debian's host-local (1.1.1) uses for every
// error of its own (allocation, duplicate, config): the spec's "plugin
// specific" range, one code for all.
const hostLocalCode = 999

// oracle runs one operation on both IPAM plugins: contiv-cni in IPAM mode
// against the agent, and host-local on the agent's pod subnet with its
// own data directory; each has its own runtime cache.
type oracle struct {
	n       *node
	dataDir string
	ours    *libcni.CNIConfig
	theirs  *libcni.CNIConfig
}

func newOracle(t *testing.T, n *node) *oracle {
	return &oracle{n: n, dataDir: t.TempDir(), ours: newRuntime(t), theirs: newRuntime(t)}
}

// lists are the same network (name, version) for both plugins.
func (o *oracle) lists(t *testing.T, version string) (ours, theirs *libcni.NetworkConfigList) {
	name := uniqueName("oracle")
	return conflist(t, version, name, ipamMode(o.n.agent.Socket)),
		conflist(t, version, name, hostLocal(o.n.subnet, o.dataDir))
}

// TestOracle compares contiv-cni (IPAM mode) with Debian's host-local on
// the same network config: result shape per version, CHECK and DEL
// behaviour, and the error cases where the two differ on purpose
// (README.md, "Differences from host-local"). Each difference is asserted
// on both sides, so the test fails if either plugin changes.
func TestOracle(t *testing.T) {
	n := startNode(t, testenv.Options{})
	for _, v := range []string{"0.3.1", "0.4.0", "1.0.0"} {
		t.Run("shape/"+v, func(t *testing.T) { newOracle(t, n).shape(t, v) })
	}
	t.Run("repeated ADD", func(t *testing.T) { newOracle(t, n).repeatedAdd(t) })
	t.Run("CHECK of a released key", func(t *testing.T) { newOracle(t, n).checkReleased(t) })
	t.Run("version 1.1.0", func(t *testing.T) { newOracle(t, n).version110(t) })
	t.Run("unknown version", func(t *testing.T) { newOracle(t, n).unknownVersion(t) })
	t.Run("ptp/host-local", func(t *testing.T) {
		dataDir := t.TempDir()
		ipam := map[string]any{"type": "host-local", "subnet": n.subnet.String(), "dataDir": dataDir}
		ptpRoundTrip(t, ipam, n.subnet, hostLocalHeld(dataDir))
	})
}

// hostLocalHeld: host-local holds an address as a file named by it in
// <dataDir>/<network>/.
func hostLocalHeld(dataDir string) heldFunc {
	return func(g Gomega, network string, _ *libcni.RuntimeConf, addr netip.Addr, held bool) {
		_, err := os.Stat(filepath.Join(dataDir, network, addr.String()))
		g.ExpectWithOffset(1, err == nil).To(Equal(held), "host-local's file of %s: %v", addr, err)
	}
}

// shape: ADD on both; the results agree on every field except the chosen
// address and the default route's gw (ours names the gateway, host-local
// copies the configured route, which has none); CHECK passes on both;
// DEL, DEL again and DEL of an unknown key succeed on both.
func (o *oracle) shape(t *testing.T, version string) {
	g := NewWithT(t)
	ctx := ctxT(t)
	ours, theirs := o.lists(t, version)
	att := attachment(t, "shape")

	resOurs, err := o.ours.AddNetworkList(ctx, ours, att)
	g.Expect(err).NotTo(HaveOccurred(), "ADD contiv-cni")
	resTheirs, err := o.theirs.AddNetworkList(ctx, theirs, att)
	g.Expect(err).NotTo(HaveOccurred(), "ADD host-local")
	mOurs, mTheirs := resultJSON(t, resOurs), resultJSON(t, resTheirs)
	o.n.checkIPs(g, version, mOurs, false)

	g.Expect(mTheirs["routes"]).To(Equal([]any{map[string]any{"dst": "0.0.0.0/0"}}), "host-local routes")
	for _, m := range []map[string]any{mOurs, mTheirs} {
		delete(m, "routes")
		ip := m["ips"].([]any)[0].(map[string]any)
		addr, err := netip.ParsePrefix(ip["address"].(string))
		g.Expect(err).NotTo(HaveOccurred())
		o.n.expectPodAddress(g, addr)
		ip["address"] = "<address>"
	}
	g.Expect(mOurs).To(Equal(mTheirs), "contiv-cni and host-local results, address and routes aside")

	if version != "0.3.1" {
		g.Expect(o.ours.CheckNetworkList(ctx, ours, att)).To(Succeed(), "CHECK contiv-cni")
		g.Expect(o.theirs.CheckNetworkList(ctx, theirs, att)).To(Succeed(), "CHECK host-local")
	}
	unknown := attachment(t, "unknown")
	for _, side := range []struct {
		rt   *libcni.CNIConfig
		list *libcni.NetworkConfigList
	}{{o.ours, ours}, {o.theirs, theirs}} {
		what := side.list.Plugins[0].Network.Type
		g.Expect(side.rt.DelNetworkList(ctx, side.list, att)).To(Succeed(), "DEL %s", what)
		g.Expect(side.rt.DelNetworkList(ctx, side.list, att)).To(Succeed(), "DEL again %s", what)
		g.Expect(side.rt.DelNetworkList(ctx, side.list, unknown)).To(Succeed(), "DEL unknown %s", what)
	}
	g.Expect(o.n.inNetwork(t, ours.Name)).To(BeEmpty())
	entries, err := os.ReadDir(filepath.Join(o.dataDir, theirs.Name))
	g.Expect(err).NotTo(HaveOccurred())
	for _, e := range entries {
		g.Expect(e.Name()).To(Or(Equal("lock"), HavePrefix("last_reserved_ip")), "host-local kept %s", e.Name())
	}
}

// repeatedAdd: a second ADD of the same key is an error for host-local
// (999, duplicate) and the same address for contiv-cni (idempotent, so a
// runtime retrying an ADD whose reply it lost gets its answer).
func (o *oracle) repeatedAdd(t *testing.T) {
	g := NewWithT(t)
	ctx := ctxT(t)
	ours, theirs := o.lists(t, "1.0.0")
	att := attachment(t, "repeat")

	first, err := o.ours.AddNetworkList(ctx, ours, att)
	g.Expect(err).NotTo(HaveOccurred())
	second, err := o.ours.AddNetworkList(ctx, ours, att)
	g.Expect(err).NotTo(HaveOccurred(), "contiv-cni: repeated ADD")
	g.Expect(resultJSON(t, second)).To(Equal(resultJSON(t, first)), "contiv-cni: repeated ADD, same result")

	_, err = o.theirs.AddNetworkList(ctx, theirs, att)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = o.theirs.AddNetworkList(ctx, theirs, att)
	e := expectCode(g, err, hostLocalCode)
	g.Expect(e.Msg).To(ContainSubstring("duplicate allocation is not allowed"))

	g.Expect(o.ours.DelNetworkList(ctx, ours, att)).To(Succeed())
	g.Expect(o.theirs.DelNetworkList(ctx, theirs, att)).To(Succeed())
}

// checkReleased: CHECK of a key whose address was released behind the
// runtime's back fails on both; contiv-cni says so with its own code 103,
// host-local with 999.
func (o *oracle) checkReleased(t *testing.T) {
	g := NewWithT(t)
	ctx := ctxT(t)
	ours, theirs := o.lists(t, "1.0.0")
	att := attachment(t, "released")
	for _, side := range []struct {
		rt   *libcni.CNIConfig
		list *libcni.NetworkConfigList
		code uint
	}{{o.ours, ours, uint(cnicodes.CodeCheckFailed)}, {o.theirs, theirs, hostLocalCode}} {
		what := side.list.Plugins[0].Network.Type
		_, err := side.rt.AddNetworkList(ctx, side.list, att)
		g.Expect(err).NotTo(HaveOccurred(), "ADD %s", what)
		g.Expect(newRuntime(t).DelNetworkList(ctx, side.list, att)).To(Succeed(), "DEL %s", what)
		e := expectCode(g, side.rt.CheckNetworkList(ctx, side.list, att), side.code)
		t.Logf("%s: CHECK of a released key: %d %s", what, e.Code, e.Msg)
	}
}

// version110: Debian's host-local speaks up to 1.0.0 (code 1 for a 1.1.0
// config); contiv-cni speaks 1.1.0 (TestLibCNI runs the whole sequence).
func (o *oracle) version110(t *testing.T) {
	g := NewWithT(t)
	ours, theirs := o.lists(t, "1.1.0")
	att := attachment(t, "v110")
	_, err := o.theirs.AddNetworkList(ctxT(t), theirs, att)
	expectCode(g, err, 1)
	_, err = o.ours.AddNetworkList(ctxT(t), ours, att)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.ours.DelNetworkList(ctxT(t), ours, att)).To(Succeed())
}

// unknownVersion: both answer a cniVersion they do not know with code 1.
func (o *oracle) unknownVersion(t *testing.T) {
	g := NewWithT(t)
	ours, theirs := o.lists(t, "9.9.9")
	for _, side := range []struct {
		rt   *libcni.CNIConfig
		list *libcni.NetworkConfigList
	}{{o.ours, ours}, {o.theirs, theirs}} {
		_, err := side.rt.AddNetworkList(ctxT(t), side.list, attachment(t, "v999"))
		e := expectCode(g, err, 1)
		g.Expect(e.Msg).To(ContainSubstring("incompatible CNI versions"), side.list.Plugins[0].Network.Type)
	}
}

// TestTinySubnet: a /31 has no room for a pod. host-local finds out at
// ADD (999, "too small"); the agent refuses the config at start-up (the
// contivconf error names podSubnetOneNodePrefixLen), so no CNI call ever
// meets such a subnet.
func TestTinySubnet(t *testing.T) {
	g := NewWithT(t)
	tiny := netip.MustParsePrefix("10.1.1.0/31")
	list := conflist(t, "1.0.0", uniqueName("tiny"), hostLocal(tiny, t.TempDir()))
	_, err := newRuntime(t).AddNetworkList(ctxT(t), list, attachment(t, "tiny"))
	e := expectCode(g, err, hostLocalCode)
	g.Expect(e.Msg).To(ContainSubstring("too small"))

	exit, logs := testenv.StartRefused(t, testenv.Options{Conf: map[string]string{"contiv.conf": smallPoolConf(t, "31")}})
	g.Expect(exit).To(HaveOccurred(), "the agent accepted podSubnetOneNodePrefixLen 31")
	g.Expect(logs).To(ContainSubstring("podSubnetOneNodePrefixLen 31"))
}
