package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/podmanager/cni"
)

func TestVersionCommand(t *testing.T) {
	g := NewWithT(t)
	out := run{Command: "VERSION"}.mustSucceed(t)
	g.Expect(out).To(MatchJSON(`{"cniVersion":"1.1.0","supportedVersions":["0.3.1","0.4.0","1.0.0","1.1.0"]}`))
}

// ipField is the "version" key of an address in results before 1.0.0.
func ipField(ver string) string {
	if strings.HasPrefix(ver, "0.") {
		return `"version":"4",`
	}
	return ""
}

// dnsField is the empty "dns" object that results before 1.0.0 always
// carry (the library's 0.x types print it; 1.x omits it when empty).
func dnsField(ver string) string {
	if strings.HasPrefix(ver, "0.") {
		return `,"dns":{}`
	}
	return ""
}

func TestAddResultShape(t *testing.T) {
	for _, ver := range allVersions {
		t.Run("plugin/"+ver, func(t *testing.T) {
			g := NewWithT(t)
			fa, sock := startAgent(t)
			conf := pluginConf(ver, sock, "")
			out := run{Command: "ADD", Conf: conf}.mustSucceed(t)
			g.Expect(out).To(MatchJSON(fmt.Sprintf(`{"cniVersion":%q,
				"interfaces":[{"name":"eth0","sandbox":%q}],
				"ips":[{%s"interface":0,"address":"10.1.5.2/24","gateway":"10.1.5.1"}],
				"routes":[{"dst":"0.0.0.0/0","gw":"10.1.5.1"}]%s}`, ver, testNetns, ipField(ver), dnsField(ver))))
			assertRequest(g, fa, "Add", ver, "contiv-net", conf)
		})
		t.Run("ipam/"+ver, func(t *testing.T) {
			g := NewWithT(t)
			fa, sock := startAgent(t)
			conf := ipamConf(ver, sock, "")
			out := run{Command: "ADD", Conf: conf}.mustSucceed(t)
			g.Expect(out).To(MatchJSON(fmt.Sprintf(`{"cniVersion":%q,
				"ips":[{%s"address":"10.1.5.2/24","gateway":"10.1.5.1"}],
				"routes":[{"dst":"0.0.0.0/0","gw":"10.1.5.1"}]%s}`, ver, ipField(ver), dnsField(ver))))
			assertRequest(g, fa, "Add", ver, "ptp-net", conf)
		})
	}
}

// assertRequest checks the one request the agent received.
func assertRequest(g *WithT, fa *fakeAgent, method, ver, network, conf string) {
	g.Expect(fa.Calls()).To(Equal([]string{method}))
	reqs := fa.Requests()
	g.Expect(reqs).To(HaveLen(1))
	req := reqs[0]
	g.Expect(req.GetVersion()).To(Equal(ver))
	g.Expect(req.GetContainerId()).To(Equal(testContainer))
	g.Expect(req.GetNetworkNamespace()).To(Equal(testNetns))
	g.Expect(req.GetInterfaceName()).To(Equal("eth0"))
	g.Expect(req.GetExtraArguments()).To(Equal(testPodArgs))
	g.Expect(req.GetNetworkName()).To(Equal(network))
	g.Expect(req.GetExtraNwConfig()).To(Equal(conf))
	g.Expect(req.GetIpamType()).To(BeEmpty())
	g.Expect(req.GetIpamData()).To(BeEmpty())
	g.Expect(req.GetConfirms()).To(Equal(method == "Add"), "only Add promises to confirm")
}

func TestAddWithoutPodArgs(t *testing.T) {
	g := NewWithT(t)
	fa, sock := startAgent(t)
	run{Command: "ADD", Conf: pluginConf("1.0.0", sock, ""), Env: map[string]string{"CNI_ARGS": ""}}.mustSucceed(t)
	g.Expect(fa.Requests()).To(HaveLen(1))
	g.Expect(fa.Requests()[0].GetExtraArguments()).To(BeEmpty())
	g.Expect(fa.Requests()[0].GetContainerId()).To(Equal(testContainer))
}

func TestAddReturnsTheAgentsMAC(t *testing.T) {
	g := NewWithT(t)
	fa, sock := startAgent(t)
	reply := okAdd()
	reply.Interfaces[0].Mac = "02:fe:00:00:00:01"
	fa.set("Add", reply)
	out := run{Command: "ADD", Conf: pluginConf("1.1.0", sock, "")}.mustSucceed(t)
	g.Expect(out).To(ContainSubstring(`"mac": "02:fe:00:00:00:01"`))
}

// prevResultOf is the result of ADD in version ver, as the runtime passes
// it back on CHECK.
func prevResultOf(ver string) string {
	return fmt.Sprintf(`{"cniVersion":%q,"interfaces":[{"name":"eth0","sandbox":%q}],
		"ips":[{%s"interface":0,"address":"10.1.5.2/24","gateway":"10.1.5.1"}],
		"routes":[{"dst":"0.0.0.0/0","gw":"10.1.5.1"}]}`, ver, testNetns, ipField(ver))
}

func TestCheckSendsPrevIPs(t *testing.T) {
	for _, ver := range allVersions[1:] { // CHECK exists since 0.4.0
		for _, mode := range []string{"plugin", "ipam"} {
			t.Run(mode+"/"+ver, func(t *testing.T) {
				g := NewWithT(t)
				fa, sock := startAgent(t)
				prev := `,"prevResult":` + prevResultOf(ver)
				conf := pluginConf(ver, sock, prev)
				if mode == "ipam" {
					conf = fmt.Sprintf(`{"cniVersion":%q,"name":"ptp-net","type":"ptp","ipam":{"type":"contiv-cni","grpcServer":%q}%s}`,
						ver, sock, prev)
				}
				out := run{Command: "CHECK", Conf: conf}.mustSucceed(t)
				g.Expect(out).To(BeEmpty())
				g.Expect(fa.Calls()).To(Equal([]string{"Check"}))
				g.Expect(fa.Requests()[0].GetPrevIps()).To(Equal([]string{"10.1.5.2/24"}))
				g.Expect(fa.Requests()[0].GetInterfaceName()).To(Equal("eth0"))
			})
		}
	}
}

func TestCheckFailureIsPassedThrough(t *testing.T) {
	g := NewWithT(t)
	fa, sock := startAgent(t)
	fa.set("Check", errReply(cni.CodeCheckFailed, `key contiv-net/c0ffee01/eth0 holds 10.1.5.3/24, not 10.1.5.2/24`))
	e := run{Command: "CHECK", Conf: pluginConf("1.1.0", sock, `,"prevResult":`+prevResultOf("1.1.0"))}.mustFail(t)
	g.Expect(e.Code).To(BeEquivalentTo(103))
	g.Expect(e.Msg).To(ContainSubstring("holds 10.1.5.3/24"))
}

func TestDel(t *testing.T) {
	for _, ver := range allVersions {
		t.Run(ver, func(t *testing.T) {
			g := NewWithT(t)
			fa, sock := startAgent(t)
			conf := ipamConf(ver, sock, "")
			out := run{Command: "DEL", Conf: conf}.mustSucceed(t)
			g.Expect(out).To(BeEmpty())
			assertRequest(g, fa, "Delete", ver, "ptp-net", conf)
		})
	}
	t.Run("without netns", func(t *testing.T) {
		g := NewWithT(t)
		fa, sock := startAgent(t)
		run{Command: "DEL", Conf: pluginConf("1.1.0", sock, ""), Env: map[string]string{"CNI_NETNS": ""}}.mustSucceed(t)
		g.Expect(fa.Calls()).To(Equal([]string{"Delete"}))
		g.Expect(fa.Requests()[0].GetNetworkNamespace()).To(BeEmpty())
	})
}

func TestGCSendsValidAttachments(t *testing.T) {
	g := NewWithT(t)
	fa, sock := startAgent(t)
	valid := `,"cni.dev/valid-attachments":[{"containerID":"c1","ifname":"eth0"},{"containerID":"c2","ifname":"net1"}]`
	run{Command: "GC", Conf: pluginConf("1.1.0", sock, valid)}.mustSucceed(t)
	g.Expect(fa.Calls()).To(Equal([]string{"GC"}))
	fa.mu.Lock()
	defer fa.mu.Unlock()
	g.Expect(fa.gc).To(HaveLen(1))
	got := fa.gc[0]
	g.Expect(got.GetVersion()).To(Equal("1.1.0"))
	g.Expect(got.GetNetworkName()).To(Equal("contiv-net"))
	g.Expect(got.GetValidAttachments()).To(HaveLen(2))
	g.Expect(got.GetValidAttachments()[0].GetContainerId()).To(Equal("c1"))
	g.Expect(got.GetValidAttachments()[0].GetInterfaceName()).To(Equal("eth0"))
	g.Expect(got.GetValidAttachments()[1].GetContainerId()).To(Equal("c2"))
	g.Expect(got.GetValidAttachments()[1].GetInterfaceName()).To(Equal("net1"))
}

func TestGCWithNoValidAttachments(t *testing.T) {
	g := NewWithT(t)
	fa, sock := startAgent(t)
	run{Command: "GC", Conf: ipamConf("1.1.0", sock, "")}.mustSucceed(t)
	fa.mu.Lock()
	defer fa.mu.Unlock()
	g.Expect(fa.gc).To(HaveLen(1))
	g.Expect(fa.gc[0].GetNetworkName()).To(Equal("ptp-net"))
	g.Expect(fa.gc[0].GetValidAttachments()).To(BeEmpty())
}

func TestStatus(t *testing.T) {
	t.Run("ready", func(t *testing.T) {
		g := NewWithT(t)
		fa, sock := startAgent(t)
		out := run{Command: "STATUS", Conf: pluginConf("1.1.0", sock, "")}.mustSucceed(t)
		g.Expect(out).To(BeEmpty())
		g.Expect(fa.Calls()).To(Equal([]string{"Status"}))
		fa.mu.Lock()
		defer fa.mu.Unlock()
		g.Expect(fa.status[0].GetNetworkName()).To(Equal("contiv-net"))
		g.Expect(fa.status[0].GetVersion()).To(Equal("1.1.0"))
	})
	t.Run("no address free", func(t *testing.T) {
		g := NewWithT(t)
		fa, sock := startAgent(t)
		fa.set("Status", errReply(cni.CodeNotAvailable, "no pod address is free in 10.1.5.0/24"))
		e := run{Command: "STATUS", Conf: pluginConf("1.1.0", sock, "")}.mustFail(t)
		g.Expect(e.Code).To(BeEquivalentTo(50))
		g.Expect(e.Msg).To(Equal("no pod address is free in 10.1.5.0/24"))
	})
}

// TestErrorCodes pins every error code contiv-cni prints: 7 from its
// config, the agent's codes passed through, 1 from skel.
func TestErrorCodes(t *testing.T) {
	cases := []struct {
		name     string
		command  string
		conf     func(sock string) string
		agent    map[string]*cni.CNIReply
		code     uint
		contains []string
		calls    []string
		repeated bool // the call is repeated (code 11 from the agent)
	}{
		{
			name: "7 missing grpcServer", command: "ADD",
			conf: func(string) string { return `{"cniVersion":"1.0.0","name":"n","type":"contiv-cni"}` },
			code: 7, contains: []string{"grpcServer", "missing"},
		},
		{
			name: "7 bad grpcTimeout", command: "ADD",
			conf: func(s string) string { return pluginConf("1.0.0", s, `,"grpcTimeout":"-1s"`) },
			code: 7, contains: []string{"grpcTimeout", `"-1s"`},
		},
		{
			name: "7 unparsable grpcTimeout", command: "DEL",
			conf: func(s string) string { return ipamConf("0.4.0", s, `,"grpcTimeout":"soon"`) },
			code: 7, contains: []string{"grpcTimeout", `"soon"`},
		},
		{
			name: "7 relative socket path", command: "ADD",
			conf: func(string) string { return pluginConf("1.0.0", "unix:cni.sock", "") },
			code: 7, contains: []string{"grpcServer", `"unix:cni.sock"`},
		},
		{
			name: "7 unknown key in ipam", command: "ADD",
			conf: func(s string) string { return ipamConf("1.0.0", s, `,"grpcServr":"x"`) },
			code: 7, contains: []string{"ipam.grpcServr", "unknown key"},
		},
		{
			name: "7 prevResult on ADD in plugin mode", command: "ADD",
			conf: func(s string) string { return pluginConf("1.0.0", s, `,"prevResult":`+prevResultOf("1.0.0")) },
			code: 7, contains: []string{"prevResult", "chained"},
		},
		{
			name: "7 not our type", command: "ADD",
			conf: func(s string) string { return `{"cniVersion":"1.0.0","name":"n","type":"bridge"}` },
			code: 7, contains: []string{"type", `"bridge"`},
		},
		{
			name: "101 pool exhausted", command: "ADD",
			conf:  func(s string) string { return pluginConf("1.0.0", s, "") },
			agent: map[string]*cni.CNIReply{"Add": errReply(cni.CodePoolExhausted, "no IP address is free in 10.1.5.0/24")},
			code:  101, contains: []string{"no IP address is free in 10.1.5.0/24"}, calls: []string{"Add"},
		},
		{
			name: "11 agent not ready", command: "ADD",
			conf:  func(s string) string { return ipamConf("0.3.1", s, "") },
			agent: map[string]*cni.CNIReply{"Add": errReply(cni.CodeTryAgainLater, "the agent is not ready, try again later")},
			code:  11, contains: []string{"not ready"}, calls: []string{"Add"}, repeated: true,
		},
		{
			name: "100 error without a code", command: "DEL",
			conf:  func(s string) string { return pluginConf("1.0.0", s, "") },
			agent: map[string]*cni.CNIReply{"Delete": errReply(0, "bolt: disk full")},
			code:  100, contains: []string{"bolt: disk full"}, calls: []string{"Delete"},
		},
		{
			name: "100 bad reply address", command: "ADD",
			conf: func(s string) string { return pluginConf("1.0.0", s, "") },
			agent: map[string]*cni.CNIReply{"Add": {Interfaces: []*cni.CNIReply_Interface{{
				IpAddresses: []*cni.CNIReply_Interface_IP{{Address: "10.1.5.2"}}}}}},
			code: 100, contains: []string{"interfaces[0].ip_addresses[0].address", `"10.1.5.2"`}, calls: []string{"Add", "Delete"},
		},
		{
			name: "100 reply without address", command: "ADD",
			conf:  func(s string) string { return pluginConf("1.0.0", s, "") },
			agent: map[string]*cni.CNIReply{"Add": {}},
			code:  100, contains: []string{"no address"}, calls: []string{"Add", "Delete"},
		},
		{
			name: "1 unsupported version", command: "ADD",
			conf: func(s string) string { return pluginConf("0.2.0", s, "") },
			code: 1, contains: []string{"incompatible CNI versions"},
		},
		{
			name: "1 version 0.3.0", command: "ADD",
			conf: func(s string) string { return ipamConf("0.3.0", s, "") },
			code: 1, contains: []string{"incompatible CNI versions"},
		},
		{
			name: "1 CHECK before 0.4.0", command: "CHECK",
			conf: func(s string) string { return pluginConf("0.3.1", s, "") },
			code: 1, contains: []string{"CHECK"},
		},
		{
			name: "1 GC before 1.1.0", command: "GC",
			conf: func(s string) string { return pluginConf("1.0.0", s, "") },
			code: 1, contains: []string{"GC"},
		},
		{
			name: "1 STATUS before 1.1.0", command: "STATUS",
			conf: func(s string) string { return pluginConf("0.4.0", s, "") },
			code: 1, contains: []string{"STATUS"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			fa, sock := startAgent(t)
			for m, r := range tc.agent {
				fa.set(m, r)
			}
			e := run{Command: tc.command, Conf: tc.conf(sock)}.mustFail(t)
			g.Expect(e.Code).To(Equal(tc.code), "msg %q", e.Msg)
			for _, s := range tc.contains {
				g.Expect(e.Msg).To(ContainSubstring(s))
			}
			if tc.repeated { // repeated for up to 2 s (contiv-cni's tryAgainBudget)
				g.Expect(fa.Calls()).To(HaveEach(tc.calls[0]))
				g.Expect(len(fa.Calls())).To(BeNumerically(">", 1))
				return
			}
			g.Expect(fa.Calls()).To(Equal(tc.calls))
		})
	}
}

// TestErrorJSONShape: the error JSON has code and msg (the CNI error
// object); nothing else is printed on stdout.
func TestErrorJSONShape(t *testing.T) {
	g := NewWithT(t)
	o := run{Command: "ADD", Conf: `{"cniVersion":"1.0.0","name":"n","type":"contiv-cni","grpcServer":"unix:x"}`}.exec(t)
	g.Expect(o.ExitErr).To(BeTrue())
	var m map[string]any
	g.Expect(json.Unmarshal([]byte(o.Stdout), &m)).To(Succeed())
	g.Expect(m).To(HaveKeyWithValue("code", BeEquivalentTo(7)))
	g.Expect(m).To(HaveKey("msg"))
}

// TestSkelErrors: the protocol errors come from skel, before contiv-cni
// runs, and the agent is never called.
func TestSkelErrors(t *testing.T) {
	cases := []struct {
		name     string
		conf     func(sock string) string
		env      map[string]string
		code     uint
		contains string
	}{
		{"4 missing CNI_IFNAME", func(s string) string { return pluginConf("1.0.0", s, "") },
			map[string]string{"CNI_IFNAME": ""}, 4, "CNI_IFNAME"},
		{"4 bad CNI_IFNAME", func(s string) string { return pluginConf("1.0.0", s, "") },
			map[string]string{"CNI_IFNAME": "eth/0"}, 4, "interface name"},
		{"6 stdin not JSON", func(string) string { return "grpcServer=/s" }, nil, 6, "network config"},
		{"7 missing name", func(s string) string { return `{"cniVersion":"1.0.0","type":"contiv-cni","grpcServer":"/s"}` },
			nil, 7, "network name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			fa, sock := startAgent(t)
			e := run{Command: "ADD", Conf: tc.conf(sock), Env: tc.env}.mustFail(t)
			g.Expect(e.Code).To(Equal(tc.code), "msg %q", e.Msg)
			g.Expect(e.Msg).To(ContainSubstring(tc.contains))
			g.Expect(fa.Calls()).To(BeEmpty())
		})
	}
}

// TestCheckWithoutPrevResult: the agent is still asked (the key must
// hold an address), with no prev_ips.
func TestCheckWithoutPrevResult(t *testing.T) {
	g := NewWithT(t)
	fa, sock := startAgent(t)
	run{Command: "CHECK", Conf: ipamConf("1.0.0", sock, "")}.mustSucceed(t)
	g.Expect(fa.Calls()).To(Equal([]string{"Check"}))
	g.Expect(fa.Requests()[0].GetPrevIps()).To(BeEmpty())
}
