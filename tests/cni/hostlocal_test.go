package cni

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	. "github.com/onsi/gomega"

	cnicodes "github.com/contiv-ipam/agent/plugins/podmanager/cni"
	"github.com/contiv-ipam/agent/tests/testenv"
)

// hostLocalCode is the code Debian's host-local (1.1.1) uses for every
// error of its own (allocation, duplicate, config): the spec's "plugin
// specific" range, one code for all.
const hostLocalCode = 999

// oracle runs one operation on both plugins: contiv-cni against the agent
// (the network plugin of the conflist, or the IPAM delegate of ptp), and
// host-local on the agent's pod subnet with its own data directory; each
// has its own runtime cache.
type oracle struct {
	n       *node
	dataDir string
	ours    *libcni.CNIConfig
	theirs  *libcni.CNIConfig
}

func newOracle(t *testing.T, n *node) *oracle {
	return &oracle{n: n, dataDir: t.TempDir(), ours: newRuntime(t), theirs: newRuntime(t)}
}

// lists are the same network (name, version) for both plugins as the
// network plugin of a conflist (the shape cnitool users write for
// host-local: {"type":"host-local","ipam":{"type":"host-local",...}}).
func (o *oracle) lists(t *testing.T, version string) (ours, theirs *libcni.NetworkConfigList) {
	name := uniqueName("oracle")
	return conflist(t, version, name, pluginMode(o.n.agent.Socket)),
		conflist(t, version, name, hostLocal(o.n.subnet, o.dataDir))
}

// TestOracle compares contiv-cni with Debian's host-local on
// the same network config: result shape per version, CHECK and DEL
// behaviour, and the error cases where the two differ on purpose
// (this package's README.md, "Differences from host-local", which
// docs/cni.md links). Each difference is asserted
// on both sides, so the test fails if either plugin changes.
func TestOracle(t *testing.T) {
	n := startNode(t, testenv.Options{Conf: map[string]string{"contiv.conf": routedConf(t)}})
	for _, v := range []string{"0.3.1", "0.4.0", "1.0.0"} {
		t.Run("shape/"+v, func(t *testing.T) { newOracle(t, n).shape(t, v) })
	}
	t.Run("plugin shape", func(t *testing.T) { newOracle(t, n).pluginShape(t) })
	t.Run("repeated ADD", func(t *testing.T) { newOracle(t, n).repeatedAdd(t) })
	t.Run("CHECK of a released key", func(t *testing.T) { newOracle(t, n).checkReleased(t) })
	t.Run("CHECK with another address", func(t *testing.T) { newOracle(t, n).checkOtherAddress(t) })
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

// delegate runs an IPAM plugin the way ptp, bridge, macvlan and ipvlan
// do (pkg/invoke, the whole ptp config on stdin): command ADD returns the
// result; CHECK and DEL carry prev as prevResult when given.
func delegate(t *testing.T, command, version, network string, ipam map[string]any, rt *libcni.RuntimeConf, prev types.Result) (types.Result, error) {
	t.Helper()
	conf := map[string]any{"cniVersion": version, "name": network, "type": "ptp", "ipMasq": false, "ipam": ipam}
	if prev != nil {
		conf["prevResult"] = resultJSON(t, prev)
	}
	stdin, err := json.Marshal(conf)
	if err != nil {
		t.Fatal(err)
	}
	plugin, err := invoke.FindInPath(fmt.Sprint(ipam["type"]), cniPath())
	if err != nil {
		t.Fatal(err)
	}
	args := &invoke.Args{Command: command, ContainerID: rt.ContainerID, NetNS: rt.NetNS, IfName: rt.IfName,
		Path: strings.Join(cniPath(), string(filepath.ListSeparator))}
	if command == "ADD" {
		return invoke.ExecPluginWithResult(ctxT(t), plugin, stdin, args, nil)
	}
	return nil, invoke.ExecPluginWithoutResult(ctxT(t), plugin, stdin, args, nil)
}

// shape: both plugins as the IPAM delegate of ptp. ADD results agree on
// every field except the chosen address and the default route's gw (ours
// names the gateway, host-local copies the configured route, which has
// none); CHECK with prevResult passes on both; DEL, DEL again and DEL of
// an unknown key succeed on both and leave nothing allocated.
func (o *oracle) shape(t *testing.T, version string) {
	g := NewWithT(t)
	network := uniqueName("oracle")
	ours := map[string]any{"type": "contiv-cni", "grpcServer": o.n.agent.Socket}
	theirs := hostLocal(o.n.subnet, o.dataDir)["ipam"].(map[string]any)
	att := attachment(t, "shape")

	resOurs, err := delegate(t, "ADD", version, network, ours, att, nil)
	g.Expect(err).NotTo(HaveOccurred(), "ADD contiv-cni")
	resTheirs, err := delegate(t, "ADD", version, network, theirs, att, nil)
	g.Expect(err).NotTo(HaveOccurred(), "ADD host-local")
	mOurs, mTheirs := resultJSON(t, resOurs), resultJSON(t, resTheirs)
	o.n.checkIPs(g, version, mOurs, false)
	g.Expect(mOurs).NotTo(HaveKey("interfaces"), "the IPAM result has no interfaces")

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

	unknown := attachment(t, "unknown")
	for _, side := range []struct {
		ipam map[string]any
		prev types.Result
	}{{ours, resOurs}, {theirs, resTheirs}} {
		what := side.ipam["type"]
		if version != "0.3.1" {
			_, err := delegate(t, "CHECK", version, network, side.ipam, att, side.prev)
			g.Expect(err).NotTo(HaveOccurred(), "CHECK %s", what)
		}
		for _, del := range []struct {
			what string
			att  *libcni.RuntimeConf
		}{{"DEL", att}, {"DEL again", att}, {"DEL unknown", unknown}} {
			_, err := delegate(t, "DEL", version, network, side.ipam, del.att, nil)
			g.Expect(err).NotTo(HaveOccurred(), "%s %s", del.what, what)
		}
	}
	g.Expect(o.n.inNetwork(t, network)).To(BeEmpty())
	entries, err := os.ReadDir(filepath.Join(o.dataDir, network))
	g.Expect(err).NotTo(HaveOccurred())
	for _, e := range entries {
		g.Expect(e.Name()).To(Or(Equal("lock"), HavePrefix("last_reserved_ip")), "host-local kept %s", e.Name())
	}
}

// pluginShape: as the network plugin of a conflist, contiv-cni returns
// the full result (interfaces, ips[].interface = 0) where host-local, an
// IPAM plugin only, returns the abbreviated one.
func (o *oracle) pluginShape(t *testing.T) {
	g := NewWithT(t)
	ours, theirs := o.lists(t, "1.0.0")
	att := attachment(t, "plugin-shape")
	resOurs, err := o.ours.AddNetworkList(ctxT(t), ours, att)
	g.Expect(err).NotTo(HaveOccurred())
	o.n.checkPluginResult(t, g, "1.0.0", att, resOurs)
	resTheirs, err := o.theirs.AddNetworkList(ctxT(t), theirs, att)
	g.Expect(err).NotTo(HaveOccurred())
	mTheirs := resultJSON(t, resTheirs)
	g.Expect(mTheirs).NotTo(HaveKey("interfaces"))
	g.Expect(mTheirs["ips"]).To(ConsistOf(Not(HaveKey("interface"))))
	g.Expect(o.ours.DelNetworkList(ctxT(t), ours, att)).To(Succeed())
	g.Expect(o.theirs.DelNetworkList(ctxT(t), theirs, att)).To(Succeed())
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

// checkOtherAddress: CHECK with a prevResult whose address is not the
// one the key holds. contiv-cni compares and fails (103, naming both);
// host-local only looks for the container ID and passes.
func (o *oracle) checkOtherAddress(t *testing.T) {
	g := NewWithT(t)
	network := uniqueName("oracle")
	ours := map[string]any{"type": "contiv-cni", "grpcServer": o.n.agent.Socket}
	theirs := hostLocal(o.n.subnet, o.dataDir)["ipam"].(map[string]any)
	att := attachment(t, "other-address")
	for _, side := range []struct {
		ipam map[string]any
		code uint
	}{{ours, uint(cnicodes.CodeCheckFailed)}, {theirs, 0}} {
		what := side.ipam["type"]
		res, err := delegate(t, "ADD", "1.0.0", network, side.ipam, att, nil)
		g.Expect(err).NotTo(HaveOccurred(), "ADD %s", what)
		held, moved := movedAddress(t, res, o.n.subnet)
		_, err = delegate(t, "CHECK", "1.0.0", network, side.ipam, att, moved)
		if side.code == 0 {
			g.Expect(err).NotTo(HaveOccurred(), "CHECK %s with another address", what)
		} else {
			e := expectCode(g, err, side.code)
			g.Expect(e.Msg).To(And(ContainSubstring(held.Addr().String()), ContainSubstring(att.ContainerID)))
		}
		_, err = delegate(t, "DEL", "1.0.0", network, side.ipam, att, nil)
		g.Expect(err).NotTo(HaveOccurred(), "DEL %s", what)
	}
}

// movedAddress returns the address of res and a copy of res whose address
// is another one of the subnet (the last host before the broadcast and
// NAT loopback, which nobody holds here).
func movedAddress(t *testing.T, res types.Result, subnet netip.Prefix) (netip.Prefix, types.Result) {
	t.Helper()
	r, err := types100.NewResultFromResult(res)
	if err != nil {
		t.Fatal(err)
	}
	held, err := netip.ParsePrefix(r.IPs[0].Address.String())
	if err != nil {
		t.Fatal(err)
	}
	other := subnet.Addr()
	for i := 0; i < 1<<(32-subnet.Bits())-3; i++ {
		other = other.Next()
	}
	r.IPs[0].Address.IP = net.IP(other.AsSlice())
	moved, err := r.GetAsVersion(res.Version())
	if err != nil {
		t.Fatal(err)
	}
	return held, moved
}

// version110: Debian's host-local speaks up to 1.0.0 (code 1 for a 1.1.0
// config); contiv-cni as the IPAM delegate answers 1.1.0 with the
// abbreviated result (TestLibCNI runs the whole 1.1.0 sequence in plugin
// mode).
func (o *oracle) version110(t *testing.T) {
	g := NewWithT(t)
	network := uniqueName("oracle")
	ours := map[string]any{"type": "contiv-cni", "grpcServer": o.n.agent.Socket}
	theirs := hostLocal(o.n.subnet, o.dataDir)["ipam"].(map[string]any)
	att := attachment(t, "v110")
	_, err := delegate(t, "ADD", "1.1.0", network, theirs, att, nil)
	e := expectCode(g, err, 1)
	g.Expect(e.Msg).To(ContainSubstring("incompatible CNI versions"))

	res, err := delegate(t, "ADD", "1.1.0", network, ours, att, nil)
	g.Expect(err).NotTo(HaveOccurred())
	m := resultJSON(t, res)
	o.n.checkIPs(g, "1.1.0", m, false)
	g.Expect(m).NotTo(HaveKey("interfaces"))
	_, err = delegate(t, "CHECK", "1.1.0", network, ours, att, res)
	g.Expect(err).NotTo(HaveOccurred(), "CHECK")
	_, err = delegate(t, "DEL", "1.1.0", network, ours, att, nil)
	g.Expect(err).NotTo(HaveOccurred(), "DEL")
	g.Expect(o.n.inNetwork(t, network)).To(BeEmpty())
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

	logs, exit := testenv.StartRefused(t, testenv.Options{Conf: map[string]string{"contiv.conf": smallPoolConf(t, "31")}})
	g.Expect(exit).To(HaveOccurred(), "the agent accepted podSubnetOneNodePrefixLen 31")
	g.Expect(logs).To(ContainSubstring("podSubnetOneNodePrefixLen 31"))
}
