package cni

import (
	"bytes"
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/tests/testenv"
)

// cnitool runs the real cnitool binary on one network of a private
// NETCONFPATH. cnitool v1.3.1 has no cache-dir option and honours no
// variable for it (it calls libcni.NewCNIConfig, whose cache is
// /var/lib/cni): the network name is unique to the test and the cache
// files it leaves are removed by name.
type cnitool struct {
	bin     string
	confDir string
	network string
}

// newCNITool writes the conflist into a NETCONFPATH of its own.
func newCNITool(t *testing.T, version string, plugin map[string]any) *cnitool {
	t.Helper()
	c := &cnitool{bin: testenv.Tool(t, "cnitool"), confDir: t.TempDir(), network: uniqueName("cnitool")}
	path := filepath.Join(c.confDir, c.network+".conflist")
	if err := os.WriteFile(path, conflistBytes(t, version, c.network, plugin), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.removeCache(t) })
	return c
}

// removeCache removes libcni's cache files of the network (the results
// directory is shared with any other runtime of the machine; only files
// named after this network are touched).
func (c *cnitool) removeCache(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(libcni.CacheDir, "results", c.network+"-*"))
	if err != nil {
		t.Error(err)
	}
	for _, f := range files {
		if err := os.Remove(f); err != nil {
			t.Errorf("removing cnitool's cache file: %v", err)
		}
	}
}

// run runs `cnitool <cmd> <network> <netns>` and returns stdout, stderr
// and the error of the run (an *exec.ExitError for rc != 0).
func (c *cnitool) run(t *testing.T, cmd, netns string, env ...string) (string, string, error) {
	t.Helper()
	x := exec.CommandContext(ctxT(t), c.bin, cmd, c.network, netns)
	x.Env = append(os.Environ(), "NETCONFPATH="+c.confDir,
		"CNI_PATH="+strings.Join(cniPath(), string(filepath.ListSeparator)), "CNI_IFNAME=eth0")
	x.Env = append(x.Env, env...)
	var stdout, stderr bytes.Buffer
	x.Stdout, x.Stderr = &stdout, &stderr
	err := x.Run()
	return stdout.String(), stderr.String(), err
}

// cnitoolContainerID is the ID cnitool derives from the netns path: "cnitool-"
// and the hex of the first 10 bytes of its SHA-512.
func cnitoolContainerID(netns string) string {
	sum := sha512.Sum512([]byte(netns))
	return fmt.Sprintf("cnitool-%x", sum[:10])
}

// netnsFile is an existing path cnitool accepts as the netns of an
// IPAM-only call.
func netnsFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "netns")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCNITool runs the CNI sequence through the real cnitool binary with
// contiv-cni as the network plugin (cniVersion 1.1.0, so that gc and
// status reach the plugin): add, check, add again, check after the
// allocation is gone, del, del again, gc, status.
func TestCNITool(t *testing.T) {
	n := startNode(t, testenv.Options{})
	t.Run("sequence", n.cnitoolSequence)
	t.Run("podArgs", n.cnitoolPodArgs)
}

func (n *node) cnitoolSequence(t *testing.T) {
	g := NewWithT(t)
	tool := newCNITool(t, "1.1.0", pluginMode(n.agent.Socket))
	netns := netnsFile(t)
	rt := &libcni.RuntimeConf{ContainerID: cnitoolContainerID(netns), NetNS: netns, IfName: "eth0"}

	out, errOut, err := tool.run(t, "add", netns)
	g.Expect(err).NotTo(HaveOccurred(), "cnitool add: %s", errOut)
	addr := n.checkIPs(g, "1.1.0", parseJSON(t, out), true)
	a, ok := n.allocationOf(t, tool.network, rt)
	g.Expect(ok).To(BeTrue(), "allocation of %s in %v", rt.ContainerID, n.allocations(t))
	g.Expect(a.Addr()).To(Equal(addr.Addr().String()))

	_, errOut, err = tool.run(t, "check", netns)
	g.Expect(err).NotTo(HaveOccurred(), "cnitool check: %s", errOut)
	out, errOut, err = tool.run(t, "add", netns)
	g.Expect(err).NotTo(HaveOccurred(), "cnitool add again: %s", errOut)
	g.Expect(n.checkIPs(g, "1.1.0", parseJSON(t, out), true)).To(Equal(addr), "add again, same key")

	// Released behind cnitool's back: its check fails naming the key.
	list := conflist(t, "1.1.0", tool.network, pluginMode(n.agent.Socket))
	g.Expect(newRuntime(t).DelNetworkList(ctxT(t), list, rt)).To(Succeed())
	_, errOut, err = tool.run(t, "check", netns)
	g.Expect(err).To(BeAssignableToTypeOf(&exec.ExitError{}), "cnitool check of a released key")
	g.Expect(errOut).To(ContainSubstring(rt.ContainerID))

	for _, what := range []string{"del", "del again"} {
		_, errOut, err = tool.run(t, "del", netns)
		g.Expect(err).NotTo(HaveOccurred(), "cnitool %s: %s", what, errOut)
	}
	_, errOut, err = tool.run(t, "del", netnsFile(t))
	g.Expect(err).NotTo(HaveOccurred(), "cnitool del of an unknown container: %s", errOut)

	// gc: cnitool passes no valid attachments, so everything of the
	// network goes: its own attachment (libcni DELs its cache entry) and
	// one it never saw (the agent's GC releases it).
	_, errOut, err = tool.run(t, "add", netns)
	g.Expect(err).NotTo(HaveOccurred(), "cnitool add: %s", errOut)
	_, err = newRuntime(t).AddNetworkList(ctxT(t), list, attachment(t, "unseen"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n.inNetwork(t, tool.network)).To(HaveLen(2))
	_, errOut, err = tool.run(t, "gc", netns)
	g.Expect(err).NotTo(HaveOccurred(), "cnitool gc: %s", errOut)
	g.Expect(n.inNetwork(t, tool.network)).To(BeEmpty(), "allocations after cnitool gc")

	_, errOut, err = tool.run(t, "status", netns)
	g.Expect(err).NotTo(HaveOccurred(), "cnitool status: %s", errOut)
}

// cnitoolPodArgs: cnitool passes CNI_ARGS on; the pod is named by them.
func (n *node) cnitoolPodArgs(t *testing.T) {
	g := NewWithT(t)
	tool := newCNITool(t, "1.0.0", pluginMode(n.agent.Socket))
	netns := netnsFile(t)
	rt := &libcni.RuntimeConf{ContainerID: cnitoolContainerID(netns), NetNS: netns, IfName: "eth0"}

	_, errOut, err := tool.run(t, "add", netns, "CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=shop;K8S_POD_NAME=cart-1")
	g.Expect(err).NotTo(HaveOccurred(), "cnitool add: %s", errOut)
	a, ok := n.allocationOf(t, tool.network, rt)
	g.Expect(ok).To(BeTrue())
	g.Expect(a.PodID.Namespace).To(Equal("shop"))
	g.Expect(a.PodID.Name).To(Equal("cart-1"))
	_, errOut, err = tool.run(t, "del", netns, "CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=shop;K8S_POD_NAME=cart-1")
	g.Expect(err).NotTo(HaveOccurred(), "cnitool del: %s", errOut)
	g.Expect(n.inNetwork(t, tool.network)).To(BeEmpty())
}

func parseJSON(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("not JSON (%v): %s", err, s)
	}
	return m
}
