package cni

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/tests/testenv"
)

// debianPlugins is where Debian's containernetworking-plugins live.
const debianPlugins = "/usr/lib/cni"

// versions are the CNI spec versions contiv-cni speaks.
var versions = []string{"0.3.1", "0.4.0", "1.0.0", "1.1.0"}

// callTimeout bounds every libcni call: a plugin that hangs fails the test
// (libcni kills it) instead of blocking the suite.
const callTimeout = 30 * time.Second

// node is an agent under test and the addressing it serves.
type node struct {
	agent   *testenv.Agent
	subnet  netip.Prefix // this node's pod subnet
	gateway netip.Addr   // its first host address
}

// startNode starts an agent and reads its pod subnet from REST.
func startNode(t *testing.T, opts testenv.Options) *node {
	t.Helper()
	a := testenv.StartAgent(t, opts)
	n := &node{agent: a}
	n.readSubnet(t)
	t.Cleanup(func() {
		if hits := a.LogMentions(t, `"level":"ERROR"`, "panic", "data race"); len(hits) > 0 {
			t.Errorf("the agent logged errors (log in %s):\n%s", a.LogPath(), strings.Join(hits, "\n"))
		}
	})
	return n
}

// readSubnet reads podSubnetThisNode from /contiv/v1/ipam.
func (n *node) readSubnet(t *testing.T) {
	t.Helper()
	code, body := n.agent.Get(t, "/contiv/v1/ipam")
	if code != 200 {
		t.Fatalf("GET /contiv/v1/ipam: %d %s", code, body)
	}
	var info struct {
		PodSubnetThisNode string `json:"podSubnetThisNode"`
	}
	if err := json.Unmarshal(body, &info); err != nil {
		t.Fatalf("GET /contiv/v1/ipam: %v in %s", err, body)
	}
	p, err := netip.ParsePrefix(info.PodSubnetThisNode)
	if err != nil {
		t.Fatalf("podSubnetThisNode %q: %v", info.PodSubnetThisNode, err)
	}
	n.subnet, n.gateway = p, p.Addr().Next()
}

// allocation is one entry of GET /contiv/v1/ipam/allocations.
type allocation = testenv.Allocation

// allocations reads the agent's allocations.
func (n *node) allocations(t *testing.T) []allocation {
	t.Helper()
	return n.agent.Allocations(t)
}

// allocationOf returns the allocation of the attachment, if any.
func (n *node) allocationOf(t *testing.T, network string, rt *libcni.RuntimeConf) (allocation, bool) {
	t.Helper()
	for _, a := range n.allocations(t) {
		if a.Network == network && a.ContainerID == rt.ContainerID && a.IfName == rt.IfName {
			return a, true
		}
	}
	return allocation{}, false
}

// inNetwork returns the allocations of one network.
func (n *node) inNetwork(t *testing.T, network string) []allocation {
	t.Helper()
	var out []allocation
	for _, a := range n.allocations(t) {
		if a.Network == network {
			out = append(out, a)
		}
	}
	return out
}

// cniPath is CNI_PATH: the binaries testenv built, then Debian's plugins.
func cniPath() []string { return []string{testenv.Binaries().Dir, debianPlugins} }

// newRuntime is one container runtime: libcni with a private cache
// directory. Two runtimes do not see each other's cached results, which
// lets a test remove an allocation behind the back of the first.
func newRuntime(t *testing.T) *libcni.CNIConfig {
	t.Helper()
	return libcni.NewCNIConfigWithCacheDir(cniPath(), t.TempDir(), nil)
}

var seq atomic.Int64

// uniqueName is a network or container name unique to this process.
func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), seq.Add(1))
}

// pluginMode returns the conflist entry of contiv-cni as the network
// plugin; extra are key, value pairs added to it (grpcTimeout).
func pluginMode(socket string, extra ...string) map[string]any {
	p := map[string]any{"type": "contiv-cni", "grpcServer": socket}
	for i := 0; i+1 < len(extra); i += 2 {
		p[extra[i]] = extra[i+1]
	}
	return p
}

// hostLocal returns the conflist entry of Debian's host-local: IPAM only,
// it is its own network plugin (the shape cnitool users write), with the
// default route configured.
func hostLocal(subnet netip.Prefix, dataDir string) map[string]any {
	return map[string]any{"type": "host-local", "ipam": map[string]any{
		"type": "host-local", "subnet": subnet.String(), "dataDir": dataDir,
		"routes": []any{map[string]any{"dst": "0.0.0.0/0"}}}}
}

// conflistBytes is the JSON of a conflist with one plugin.
func conflistBytes(t *testing.T, version, name string, plugin map[string]any) []byte {
	t.Helper()
	data, err := json.Marshal(map[string]any{"cniVersion": version, "name": name, "plugins": []any{plugin}})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// conflist parses a conflist with one plugin the way libcni loads files.
func conflist(t *testing.T, version, name string, plugin map[string]any) *libcni.NetworkConfigList {
	t.Helper()
	list, err := libcni.ConfListFromBytes(conflistBytes(t, version, name, plugin))
	if err != nil {
		t.Fatalf("conflist %s %s: %v", version, name, err)
	}
	return list
}

// attachment is a container's runtime config: a unique container ID,
// eth0, and a netns path that exists (a file; contiv-cni in plugin mode
// does not enter it).
func attachment(t *testing.T, prefix string, args ...[2]string) *libcni.RuntimeConf {
	t.Helper()
	netns := filepath.Join(t.TempDir(), "netns")
	if err := os.WriteFile(netns, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return &libcni.RuntimeConf{ContainerID: uniqueName(prefix), NetNS: netns, IfName: "eth0", Args: args}
}

// podArgs are the CNI_ARGS kubelet's runtimes pass for a pod.
func podArgs(namespace, name, containerID string) [][2]string {
	return [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", namespace},
		{"K8S_POD_NAME", name}, {"K8S_POD_INFRA_CONTAINER_ID", containerID},
		{"K8S_POD_UID", "0f5e6a1c-3b9d-4c1e-9a57-" + fmt.Sprintf("%012d", len(name))}}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	t.Cleanup(cancel)
	return ctx
}

// cniError returns the CNI error a plugin printed, nil when err is not one.
func cniError(err error) *types.Error {
	var e *types.Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// expectCode asserts that err is a CNI error with the code and returns it.
func expectCode(g Gomega, err error, code uint) *types.Error {
	g.ExpectWithOffset(1, err).To(HaveOccurred(), "expected CNI error code %d", code)
	e := cniError(err)
	g.ExpectWithOffset(1, e).NotTo(BeNil(), "expected CNI error code %d, got %T %v", code, err, err)
	g.ExpectWithOffset(1, e.Code).To(Equal(code), "error %v", e)
	g.ExpectWithOffset(1, e.Msg).NotTo(BeEmpty(), "error %v has no message", e)
	return e
}

// resultJSON is the result as a runtime prints it, decoded generically so
// that the presence of a field can be asserted.
func resultJSON(t *testing.T, res types.Result) map[string]any {
	t.Helper()
	var buf bytes.Buffer
	if err := res.PrintTo(&buf); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatalf("result %s: %v", buf.Bytes(), err)
	}
	return m
}

// legacy tells whether the version is before 1.0.0 (ips carry "version").
func legacy(version string) bool { return version == "0.3.1" || version == "0.4.0" }

// checkIPs asserts the ips and routes of a result of n and returns the
// address; withInterface: the plugin form (ips[].interface = 0).
func (n *node) checkIPs(g Gomega, version string, res map[string]any, withInterface bool) netip.Prefix {
	g.ExpectWithOffset(1, res).To(HaveKeyWithValue("cniVersion", version))
	ips, _ := res["ips"].([]any)
	g.ExpectWithOffset(1, ips).To(HaveLen(1), "ips of %v", res)
	ip, _ := ips[0].(map[string]any)
	if legacy(version) {
		g.ExpectWithOffset(1, ip).To(HaveKeyWithValue("version", "4"))
	} else {
		g.ExpectWithOffset(1, ip).NotTo(HaveKey("version"))
	}
	if withInterface {
		g.ExpectWithOffset(1, ip).To(HaveKeyWithValue("interface", BeNumerically("==", 0)))
	} else {
		g.ExpectWithOffset(1, ip).NotTo(HaveKey("interface"))
	}
	g.ExpectWithOffset(1, ip).To(HaveKeyWithValue("gateway", n.gateway.String()))
	addr, err := netip.ParsePrefix(fmt.Sprint(ip["address"]))
	g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
	n.expectPodAddress(g, addr)
	g.ExpectWithOffset(1, res["routes"]).To(Equal([]any{
		map[string]any{"dst": "0.0.0.0/0", "gw": n.gateway.String()}}))
	return addr
}

// expectPodAddress: a host address of the pod subnet with its length.
func (n *node) expectPodAddress(g Gomega, addr netip.Prefix) {
	g.ExpectWithOffset(2, addr.Bits()).To(Equal(n.subnet.Bits()), "prefix length of %s", addr)
	g.ExpectWithOffset(2, n.subnet.Contains(addr.Addr())).To(BeTrue(), "%s in %s", addr, n.subnet)
	g.ExpectWithOffset(2, addr.Addr()).NotTo(Equal(n.subnet.Addr()), "the network address")
	g.ExpectWithOffset(2, addr.Addr()).NotTo(Equal(n.gateway), "the gateway")
}

// checkPluginResult asserts the full result of plugin mode and returns
// the address.
func (n *node) checkPluginResult(t *testing.T, g Gomega, version string, rt *libcni.RuntimeConf, res types.Result) netip.Prefix {
	t.Helper()
	m := resultJSON(t, res)
	g.ExpectWithOffset(1, m["interfaces"]).To(Equal([]any{
		map[string]any{"name": rt.IfName, "sandbox": rt.NetNS}}), "interfaces of %v", m)
	return n.checkIPs(g, version, m, true)
}
