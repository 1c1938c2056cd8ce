package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	cniversion "github.com/containernetworking/cni/pkg/version"
	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/podmanager/cni"
)

// delegateConf is plugin mode with an ipam section of the fake IPAM
// plugin (built by TestMain onto CNI_PATH), as Contiv's conflist has it
// with host-local.
func delegateConf(ver, sock string) string {
	return pluginConf(ver, sock, `,"ipam":{"type":"fake-ipam","subnet":"10.9.0.0/24"}`)
}

// delegateLog is the file the fake IPAM appends its commands to.
func delegateLog(t *testing.T) (string, func() []string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fake-ipam.log")
	return path, func() []string {
		data, err := os.ReadFile(path)
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return strings.Fields(string(data))
	}
}

func TestDelegatedAdd(t *testing.T) {
	for _, ver := range allVersions {
		t.Run(ver, func(t *testing.T) {
			g := NewWithT(t)
			fa, sock := startAgent(t)
			logPath, calls := delegateLog(t)
			out := run{Command: "ADD", Conf: delegateConf(ver, sock),
				Env: map[string]string{"FAKE_IPAM_LOG": logPath}}.mustSucceed(t)
			g.Expect(calls()).To(Equal([]string{"ADD"}))
			g.Expect(fa.Calls()).To(Equal([]string{"Add"}))
			req := fa.Requests()[0]
			g.Expect(req.GetIpamType()).To(Equal("fake-ipam"))
			g.Expect(req.GetIpamData()).To(MatchJSON(`{"address":"10.9.0.5/24","gateway":"10.9.0.1"}`))
			g.Expect(req.GetContainerId()).To(Equal(testContainer))
			g.Expect(req.GetConfirms()).To(BeTrue())
			// The result is the agent's (plugin mode: with the interface).
			var res map[string]any
			g.Expect(json.Unmarshal([]byte(out), &res)).To(Succeed())
			g.Expect(res).To(HaveKey("interfaces"))
			g.Expect(res["cniVersion"]).To(Equal(ver))
		})
	}
}

// TestDelegatedAddAgentFailure: when the agent refuses or cannot be
// reached, the delegate's lease is released (its DEL runs) and the
// agent's error is returned.
func TestDelegatedAddAgentFailure(t *testing.T) {
	cases := []struct {
		name  string
		setup func(fa *fakeAgent, sock string) string // returns the socket to use
		code  uint
	}{
		{"agent error", func(fa *fakeAgent, sock string) string {
			fa.set("Add", errReply(cni.CodeBadRequest, "bad external IPAM result"))
			return sock
		}, 102},
		{"agent unreachable", func(_ *fakeAgent, sock string) string {
			return sock + ".absent"
		}, 11},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			fa, sock := startAgent(t)
			sock = tc.setup(fa, sock)
			logPath, calls := delegateLog(t)
			e := run{Command: "ADD", Conf: delegateConf("1.0.0", sock),
				Env: map[string]string{"FAKE_IPAM_LOG": logPath}}.mustFail(t)
			g.Expect(e.Code).To(Equal(tc.code), "msg %q", e.Msg)
			g.Expect(calls()).To(Equal([]string{"ADD", "DEL"}))
		})
	}
}

// TestDelegatedAddUnusableReply: the agent acknowledged the ADD but its
// reply cannot be printed: both the agent's address and the delegate's
// lease are released before the error is returned.
func TestDelegatedAddUnusableReply(t *testing.T) {
	g := NewWithT(t)
	fa, sock := startAgent(t)
	fa.set("Add", &cni.CNIReply{})
	logPath, calls := delegateLog(t)
	e := run{Command: "ADD", Conf: delegateConf("1.0.0", sock),
		Env: map[string]string{"FAKE_IPAM_LOG": logPath}}.mustFail(t)
	g.Expect(e.Code).To(BeEquivalentTo(100))
	g.Expect(fa.Calls()).To(Equal([]string{"Add", "Delete"}))
	g.Expect(calls()).To(Equal([]string{"ADD", "DEL"}))
}

func TestDelegateAddFailureSkipsTheAgent(t *testing.T) {
	g := NewWithT(t)
	fa, sock := startAgent(t)
	logPath, calls := delegateLog(t)
	e := run{Command: "ADD", Conf: delegateConf("1.0.0", sock),
		Env: map[string]string{"FAKE_IPAM_LOG": logPath, "FAKE_IPAM_FAIL": "ADD"}}.mustFail(t)
	g.Expect(e.Code).To(BeEquivalentTo(42))
	g.Expect(e.Msg).To(ContainSubstring(`"fake-ipam"`))
	g.Expect(e.Msg).To(ContainSubstring("fake IPAM failed ADD"))
	g.Expect(calls()).To(Equal([]string{"ADD"}))
	g.Expect(fa.Calls()).To(BeEmpty())
}

func TestDelegateMissingFromCNIPath(t *testing.T) {
	g := NewWithT(t)
	fa, sock := startAgent(t)
	conf := pluginConf("1.0.0", sock, `,"ipam":{"type":"no-such-ipam"}`)
	e := run{Command: "ADD", Conf: conf}.mustFail(t)
	g.Expect(e.Code).To(BeEquivalentTo(100))
	g.Expect(e.Msg).To(ContainSubstring(`"no-such-ipam"`))
	g.Expect(e.Msg).To(ContainSubstring(binDir))
	g.Expect(fa.Calls()).To(BeEmpty())
}

// TestDelegatedDel: DEL runs the agent's Delete, then the delegate's DEL;
// both always run and the first error wins.
func TestDelegatedDel(t *testing.T) {
	cases := []struct {
		name      string
		agent     *cni.CNIReply
		unreached bool
		failDel   bool
		code      uint // 0: success
	}{
		{name: "both succeed"},
		{name: "agent fails", agent: errReply(cni.CodeInternal, "store failed"), code: 100},
		{name: "agent unreachable", unreached: true, code: 11},
		{name: "delegate fails", failDel: true, code: 42},
		{name: "both fail", agent: errReply(cni.CodeInternal, "store failed"), failDel: true, code: 100},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			fa, sock := startAgent(t)
			if tc.agent != nil {
				fa.set("Delete", tc.agent)
			}
			if tc.unreached {
				sock += ".absent"
			}
			logPath, calls := delegateLog(t)
			env := map[string]string{"FAKE_IPAM_LOG": logPath}
			if tc.failDel {
				env["FAKE_IPAM_FAIL"] = "DEL"
			}
			r := run{Command: "DEL", Conf: delegateConf("1.1.0", sock), Env: env}
			if tc.code == 0 {
				r.mustSucceed(t)
			} else {
				e := r.mustFail(t)
				g.Expect(e.Code).To(Equal(tc.code), "msg %q", e.Msg)
			}
			g.Expect(calls()).To(Equal([]string{"DEL"}))
			if !tc.unreached {
				g.Expect(fa.Calls()).To(Equal([]string{"Delete"}))
				g.Expect(fa.Requests()[0].GetIpamType()).To(BeEmpty())
			}
		})
	}
}

func TestDelegatedCheck(t *testing.T) {
	for _, failCheck := range []bool{false, true} {
		t.Run(fmt.Sprintf("delegate fails %v", failCheck), func(t *testing.T) {
			g := NewWithT(t)
			fa, sock := startAgent(t)
			logPath, calls := delegateLog(t)
			env := map[string]string{"FAKE_IPAM_LOG": logPath}
			if failCheck {
				env["FAKE_IPAM_FAIL"] = "CHECK"
			}
			conf := pluginConf("1.0.0", sock, `,"ipam":{"type":"fake-ipam"},"prevResult":`+prevResultOf("1.0.0"))
			r := run{Command: "CHECK", Conf: conf, Env: env}
			if failCheck {
				e := r.mustFail(t)
				g.Expect(e.Code).To(BeEquivalentTo(42))
			} else {
				r.mustSucceed(t)
			}
			g.Expect(calls()).To(Equal([]string{"CHECK"}))
			if failCheck {
				g.Expect(fa.Calls()).To(BeEmpty())
			} else {
				g.Expect(fa.Calls()).To(Equal([]string{"Check"}))
				g.Expect(fa.Requests()[0].GetPrevIps()).To(Equal([]string{"10.1.5.2/24"}))
			}
		})
	}
}

// debianPlugins is where `make test-deps` installs Debian's
// containernetworking-plugins.
const debianPlugins = "/usr/lib/cni"

// TestDelegateToHostLocal runs the real host-local (Debian's, installed
// by `make test-deps`) as the delegate: its lease exists while the agent
// holds the address and is gone after DEL, and after an ADD the agent
// refused.
func TestDelegateToHostLocal(t *testing.T) {
	if _, err := os.Stat(filepath.Join(debianPlugins, "host-local")); err != nil {
		t.Fatalf("Debian's host-local is needed (run `make test-deps`): %v", err)
	}
	cniPath := binDir + ":" + debianPlugins
	conf := func(sock, dataDir string) string {
		return pluginConf("1.0.0", sock, fmt.Sprintf(
			`,"ipam":{"type":"host-local","subnet":"10.9.0.0/24","dataDir":%q}`, dataDir))
	}
	lease := func(dataDir string) string { return filepath.Join(dataDir, "contiv-net", "10.9.0.2") }
	t.Run("add and del", func(t *testing.T) {
		g := NewWithT(t)
		fa, sock := startAgent(t)
		dataDir := t.TempDir()
		env := map[string]string{"CNI_PATH": cniPath}
		run{Command: "ADD", Conf: conf(sock, dataDir), Env: env}.mustSucceed(t)
		g.Expect(fa.Requests()[0].GetIpamType()).To(Equal("host-local"))
		g.Expect(fa.Requests()[0].GetIpamData()).To(MatchJSON(`{"address":"10.9.0.2/24","gateway":"10.9.0.1"}`))
		g.Expect(lease(dataDir)).To(BeAnExistingFile())
		run{Command: "DEL", Conf: conf(sock, dataDir), Env: env}.mustSucceed(t)
		g.Expect(lease(dataDir)).NotTo(BeAnExistingFile())
		g.Expect(fa.Calls()).To(Equal([]string{"Add", "Delete"}))
	})
	t.Run("dual-stack", func(t *testing.T) {
		g := NewWithT(t)
		fa, sock := startAgent(t)
		dataDir := t.TempDir()
		env := map[string]string{"CNI_PATH": cniPath}
		dual := pluginConf("1.0.0", sock, fmt.Sprintf(
			`,"ipam":{"type":"host-local","ranges":[[{"subnet":"10.9.0.0/24"}],[{"subnet":"fd00:9::/64"}]],"dataDir":%q}`, dataDir))
		run{Command: "ADD", Conf: dual, Env: env}.mustSucceed(t)
		g.Expect(fa.Requests()[0].GetIpamData()).To(MatchJSON(
			`[{"address":"10.9.0.2/24","gateway":"10.9.0.1"},{"address":"fd00:9::2/64","gateway":"fd00:9::1"}]`))
		g.Expect(lease(dataDir)).To(BeAnExistingFile())
		g.Expect(filepath.Join(dataDir, "contiv-net", "fd00:9::2")).To(BeAnExistingFile())
		run{Command: "DEL", Conf: dual, Env: env}.mustSucceed(t)
		g.Expect(lease(dataDir)).NotTo(BeAnExistingFile())
		g.Expect(filepath.Join(dataDir, "contiv-net", "fd00:9::2")).NotTo(BeAnExistingFile())
	})
	t.Run("agent refuses", func(t *testing.T) {
		g := NewWithT(t)
		fa, sock := startAgent(t)
		fa.set("Add", errReply(cni.CodeBadRequest, "bad external IPAM result"))
		dataDir := t.TempDir()
		e := run{Command: "ADD", Conf: conf(sock, dataDir), Env: map[string]string{"CNI_PATH": cniPath}}.mustFail(t)
		g.Expect(e.Code).To(BeEquivalentTo(102))
		// host-local ran (it keeps its cursor) and its lease was released.
		g.Expect(filepath.Join(dataDir, "contiv-net", "last_reserved_ip.0")).To(BeAnExistingFile())
		g.Expect(lease(dataDir)).NotTo(BeAnExistingFile())
	})
}

// TestIPAMData: one address of the delegate is one IPConfig object (as
// contiv-cni always sent it), several are an array in the delegate's
// order; the interface index is dropped, whatever the result's version.
func TestIPAMData(t *testing.T) {
	v4 := `{"address":"10.9.0.5/24","gateway":"10.9.0.1"}`
	v6 := `{"address":"fd00:9::5/64","gateway":"fd00:9::1"}`
	cases := []struct {
		name   string
		ver    string
		result string // the delegate's ips
		want   string
	}{
		{"one address", "1.0.0", `[{"interface":0,"address":"10.9.0.5/24","gateway":"10.9.0.1"}]`, v4},
		{"one address, 0.3.1", "0.3.1", `[{"version":"4","address":"10.9.0.5/24","gateway":"10.9.0.1"}]`, v4},
		{"IPv4+IPv6", "1.1.0", "[" + v4 + "," + v6 + "]", "[" + v4 + "," + v6 + "]"},
		{"IPv6+IPv4, 0.4.0", "0.4.0",
			`[{"version":"6","interface":0,"address":"fd00:9::5/64","gateway":"fd00:9::1"},{"version":"4","interface":0,"address":"10.9.0.5/24","gateway":"10.9.0.1"}]`,
			"[" + v6 + "," + v4 + "]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			itf := ""
			if strings.Contains(tc.result, `"interface"`) {
				itf = `"interfaces":[{"name":"eth0"}],`
			}
			raw, err := cniversion.NewResult(tc.ver, []byte(fmt.Sprintf(`{"cniVersion":%q,%s"ips":%s}`, tc.ver, itf, tc.result)))
			g.Expect(err).NotTo(HaveOccurred())
			data, err := ipamData(raw)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(data).To(MatchJSON(tc.want))
		})
	}
	t.Run("no address", func(t *testing.T) {
		g := NewWithT(t)
		raw, err := cniversion.NewResult("1.0.0", []byte(`{"cniVersion":"1.0.0"}`))
		g.Expect(err).NotTo(HaveOccurred())
		_, err = ipamData(raw)
		g.Expect(err).To(MatchError(ContainSubstring("no address")))
	})
}

// TestDelegatedAddDualStack: a delegate that returns an address per
// family has both passed to the agent, as an array in its order.
func TestDelegatedAddDualStack(t *testing.T) {
	v4, v6 := "10.9.0.5/24@10.9.0.1", "fd00:9::5/64@fd00:9::1"
	v4JSON, v6JSON := `{"address":"10.9.0.5/24","gateway":"10.9.0.1"}`, `{"address":"fd00:9::5/64","gateway":"fd00:9::1"}`
	cases := []struct{ name, addrs, want string }{
		{"IPv4+IPv6", v4 + " " + v6, "[" + v4JSON + "," + v6JSON + "]"},
		{"IPv6+IPv4", v6 + " " + v4, "[" + v6JSON + "," + v4JSON + "]"},
		{"IPv6 only", v6, v6JSON},
	}
	for _, ver := range allVersions {
		for _, tc := range cases {
			t.Run(ver+"/"+tc.name, func(t *testing.T) {
				g := NewWithT(t)
				fa, sock := startAgent(t)
				run{Command: "ADD", Conf: delegateConf(ver, sock),
					Env: map[string]string{"FAKE_IPAM_ADDRS": tc.addrs}}.mustSucceed(t)
				g.Expect(fa.Calls()).To(Equal([]string{"Add"}))
				g.Expect(fa.Requests()[0].GetIpamType()).To(Equal("fake-ipam"))
				g.Expect(fa.Requests()[0].GetIpamData()).To(MatchJSON(tc.want))
			})
		}
	}
}
