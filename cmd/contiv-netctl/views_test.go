package main

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/contiv-ipam/agent/plugins/ipam"
)

// ansi matches the colour escapes.
var ansi = regexp.MustCompile("\x1b\\[[0-9]+m")

// Colour: only with -color always, or auto on a terminal without
// NO_COLOR; the coloured table is the plain one once the escapes are
// removed (the columns stay aligned), not-ready is red, stale yellow,
// ready green, and the fill bars are coloured by their level.
func TestColor(t *testing.T) {
	c := newCluster(t)
	plain := c.runAt(t, nil, false, "nodes")
	NewWithT(t).Expect(plain.code).To(Equal(exitOK), plain.stderr)
	NewWithT(t).Expect(ansi.MatchString(plain.stdout)).To(BeFalse())
	for _, tc := range []struct {
		name    string
		env     map[string]string
		tty     bool
		args    []string
		colored bool
	}{
		{"auto on a terminal", nil, true, []string{"nodes"}, true},
		{"auto not on a terminal", nil, false, []string{"nodes"}, false},
		{"auto with NO_COLOR", map[string]string{envNoColor: "1"}, true, []string{"nodes"}, false},
		{"auto with an empty NO_COLOR", map[string]string{envNoColor: ""}, true, []string{"nodes"}, true},
		{"always", map[string]string{envNoColor: "1"}, false, []string{"-color", "always", "nodes"}, true},
		{"never", nil, true, []string{"-color=never", "nodes"}, false},
		{"json is never coloured", nil, true, []string{"-color", "always", "nodes", "-o", "json"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			res := c.runAt(t, tc.env, tc.tty, tc.args...)
			g.Expect(res.code).To(Equal(exitOK), res.stderr)
			g.Expect(ansi.MatchString(res.stdout)).To(Equal(tc.colored))
			if tc.colored {
				g.Expect(ansi.ReplaceAllString(res.stdout, "")).To(Equal(plain.stdout))
				g.Expect(res.stdout).To(ContainSubstring("\x1b[31mnot-ready\x1b[0m"))
				g.Expect(res.stdout).To(ContainSubstring("\x1b[33mstale 10m\x1b[0m"))
				g.Expect(res.stdout).To(ContainSubstring("\x1b[32mready\x1b[0m"))
			}
		})
	}
	t.Run("fill bars", func(t *testing.T) {
		g := NewWithT(t)
		res := c.runAt(t, nil, false, "-color", "always", "ipam")
		g.Expect(res.code).To(Equal(exitOK), res.stderr)
		g.Expect(res.stdout).To(ContainSubstring("\x1b[32m[#######.....] 58% 148/253\x1b[0m"))
		g.Expect(res.stdout).To(ContainSubstring("\x1b[31m[###########.] 95% 61/64\x1b[0m"))
		res2 := c.runAt(t, nil, false, "-color", "never", "ipam")
		g.Expect(ansi.ReplaceAllString(res.stdout, "")).To(Equal(res2.stdout))
	})
}

func TestFillBar(t *testing.T) {
	for _, tc := range []struct {
		used, total uint64
		bar, color  string
	}{
		{0, 254, "[............] 0% 0/254", colorGreen},
		{1, 254, "[#...........] 0% 1/254", colorGreen},
		{148, 254, "[######......] 58% 148/254", colorGreen},
		{180, 254, "[########....] 70% 180/254", colorYellow},
		{229, 254, "[##########..] 90% 229/254", colorRed},
		{254, 254, "[############] 100% 254/254", colorRed},
		{3, 0, "[????????????] -", colorDefault},
	} {
		g := NewWithT(t)
		g.Expect(fillBar(tc.used, tc.total)).To(Equal(tc.bar))
		g.Expect(fillColor(tc.used, tc.total)).To(Equal(tc.color))
	}
}

func TestAge(t *testing.T) {
	now := goldenNow
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"}, {45 * time.Second, "45s"}, {119 * time.Second, "119s"}, {3*time.Minute + 20*time.Second, "3m20s"},
		{5 * time.Minute, "5m"}, {95 * time.Minute, "95m"}, {5*time.Hour + 10*time.Minute, "5h10m"}, {6 * time.Hour, "6h"},
		{30 * time.Hour, "30h"}, {12 * 24 * time.Hour, "12d"}, {-2 * time.Minute, "in 2m"},
	} {
		NewWithT(t).Expect(age(now, now.Add(-tc.d))).To(Equal(tc.want), "%s", tc.d)
	}
	NewWithT(t).Expect(age(now, time.Time{})).To(Equal("-"))
}

// An etcd that does not answer: exit 1 within -timeout, naming the
// endpoint, where it came from and what to give.
func TestEtcdUnreachable(t *testing.T) {
	g := NewWithT(t)
	start := time.Now()
	res := netctl(t, map[string]string{envEtcdctl: "127.0.0.1:1"}, "", "-timeout", "300ms", "nodes")
	g.Expect(res.code).To(Equal(exitError))
	g.Expect(time.Since(start)).To(BeNumerically("<", 10*time.Second))
	g.Expect(res.stderr).To(HavePrefix("contiv-netctl: nodes: etcd 127.0.0.1:1 (env ETCDCTL_ENDPOINTS): reading "))
	g.Expect(res.stderr).To(ContainSubstring("no reply within -timeout 300ms (is it running? -etcd, CONTIV_NETCTL_ETCD or ETCDCTL_ENDPOINTS name it)"))
	// CONTIV_NETCTL_ETCD wins over ETCDCTL_ENDPOINTS, -etcd over both.
	res = netctl(t, map[string]string{envEtcd: "127.0.0.1:2", envEtcdctl: "127.0.0.1:1"}, "", "-timeout", "100ms", "nodes")
	g.Expect(res.stderr).To(ContainSubstring("etcd 127.0.0.1:2 (env CONTIV_NETCTL_ETCD)"))
	res = netctl(t, map[string]string{envEtcd: "127.0.0.1:2"}, "", "-timeout", "100ms", "-etcd", "http://127.0.0.1:3,127.0.0.1:4", "pods")
	g.Expect(res.stderr).To(ContainSubstring("contiv-netctl: pods: etcd http://127.0.0.1:3,127.0.0.1:4 (-etcd)"))
	res = netctl(t, nil, "", "-timeout", "100ms", "ipam", "worker-1")
	g.Expect(res.code).To(Equal(exitError))
	g.Expect(res.stderr).To(ContainSubstring("contiv-netctl: ipam worker-1: etcd http://127.0.0.1:2379 (the default)"))
}

// An empty cluster: nodes says so; pods lists none.
func TestEmptyCluster(t *testing.T) {
	g := NewWithT(t)
	c := newCluster(t)
	_, err := c.etcd.Client(t).Delete(t.Context(), "/", clientv3.WithPrefix())
	g.Expect(err).NotTo(HaveOccurred())
	res := c.runAt(t, nil, false, "nodes")
	g.Expect(res.code).To(Equal(exitOK), res.stderr)
	g.Expect(res.stdout).To(HavePrefix("no nodes: etcd "))
	res = c.runAt(t, nil, false, "nodes", "-o", "json")
	g.Expect(res.stdout).To(MatchJSON(`{"nodes": []}`))
	res = c.runAt(t, nil, false, "pods", "-o", "json")
	g.Expect(res.code).To(Equal(exitOK), res.stderr)
	g.Expect(res.stdout).To(MatchJSON(`{"pods": [], "unreachable": []}`))
}

// A record that does not decode is left out with a warning naming its
// key; the others are listed.
func TestBadRecords(t *testing.T) {
	g := NewWithT(t)
	c := newCluster(t)
	cli := c.etcd.Client(t)
	for key, value := range map[string]string{
		"/vnf-agent/contiv-agent/status/worker-1":         `{"version": 2}`,
		"/vnf-agent/contiv-ksr/allocatedIDs/9":            `{"name": ""}`,
		"/vnf-agent/contiv-ksr/contiv/poolgrant/worker-2": `[`,
	} {
		_, err := cli.Put(t.Context(), key, value)
		g.Expect(err).NotTo(HaveOccurred())
	}
	res := c.runAt(t, nil, false, "nodes", "-o", "name")
	g.Expect(res.code).To(Equal(exitOK), res.stderr)
	g.Expect(res.stdout).To(Equal("worker-1\nworker-2\nworker-3\nworker-4\nworker-5\n"))
	g.Expect(res.stderr).To(ContainSubstring("contiv-netctl: warning: agent status /vnf-agent/contiv-agent/status/worker-1: invalid agent status"))
	g.Expect(res.stderr).To(ContainSubstring("contiv-netctl: warning: node-ID record /vnf-agent/contiv-ksr/allocatedIDs/9: names no node"))
	g.Expect(res.stderr).To(ContainSubstring("contiv-netctl: warning: pool grant /vnf-agent/contiv-ksr/contiv/poolgrant/worker-2: "))
	res = c.runAt(t, nil, false, "nodes")
	g.Expect(res.stdout).To(MatchRegexp(`(?m)^1\s+worker-1\s.*\sabsent\s+66m$`), "no status: absent, never ready")
}

// The agents are asked at most agentLimit at once, and each within
// -timeout: a silent agent is reported, the others are listed.
func TestPodsSilentAgent(t *testing.T) {
	g := NewWithT(t)
	c := newCluster(t)
	c.agent2.mu.Lock()
	c.agent2.delay = time.Minute
	c.agent2.mu.Unlock()
	start := time.Now()
	res := c.runAt(t, map[string]string{}, false, "-timeout", "500ms", "pods", "-o", "name")
	g.Expect(time.Since(start)).To(BeNumerically("<", 20*time.Second))
	g.Expect(res.code).To(Equal(exitError))
	g.Expect(res.stdout).To(Equal("default/web-0\nkube-system/coredns-1\n"))
	g.Expect(res.stderr).To(ContainSubstring("contiv-netctl: warning: node worker-2: GET " + c.agent2.URL +
		"/contiv/v1/ipam/allocations: no reply within -timeout 500ms"))
}

// The credentials of the global flags go to every agent.
func TestPodsSendCredentials(t *testing.T) {
	g := NewWithT(t)
	c := newCluster(t)
	res := c.runAt(t, map[string]string{envUser: "admin:s3cret"}, false, "pods", "-node", "worker-2")
	g.Expect(res.code).To(Equal(exitOK), res.stderr)
	reqs := c.agent2.received()
	g.Expect(reqs).To(HaveLen(1))
	g.Expect(reqs[0].path).To(Equal(allocationsPath))
	g.Expect(reqs[0].header.Get("Authorization")).To(Equal(basic("admin", "s3cret")))
	g.Expect(c.agent1.received()).To(BeEmpty(), "-node asks only that node's agent")
}

// --from-report is -from-report.
func TestReleaseDoubleDash(t *testing.T) {
	g := NewWithT(t)
	agent := newFakeAgent(t)
	for _, flag := range []string{"-from-report", "--from-report", "--from-report=-"} {
		args := []string{"-server", agent.URL, "ipam", "release", flag}
		if !strings.Contains(flag, "=") {
			args = append(args, "-")
		}
		res := netctl(t, nil, "not json", args...)
		g.Expect(res.code).To(Equal(exitError), flag)
		g.Expect(res.stderr).To(ContainSubstring("stdin"), flag)
		g.Expect(res.stderr).To(ContainSubstring("nothing released"), flag)
	}
}

// The REST paths and reply shapes the views copy are the agent's.
func TestTheAgentsViewCalls(t *testing.T) {
	g := NewWithT(t)
	g.Expect(allocationsPath).To(Equal(ipam.AllocationsPath))
	g.Expect(poolsPath).To(Equal(ipam.PoolsPath))
	g.Expect(ipamPath).To(Equal(ipam.IPAMPath))
	g.Expect(candidatesPath).To(Equal(ipam.CandidatesPath))

	strict := func(v any, into any) {
		t.Helper()
		data, err := json.Marshal(v)
		g.Expect(err).NotTo(HaveOccurred())
		dec := json.NewDecoder(strings.NewReader(string(data)))
		dec.DisallowUnknownFields()
		g.Expect(dec.Decode(into)).To(Succeed(), "%s", data)
	}
	// Every field the agent sends decodes into ours.
	var allocs allocationList
	strict(ipam.Allocations{Pods: []ipam.PodAllocation{{PodID: ipam.PodName{Name: "p", Namespace: "ns"}, MainIP: "10.1.1.2",
		IPs: []string{"10.1.1.2", "fd00::2"}, Network: "n", ContainerID: "c", IfName: "eth0", Owner: "o", Seq: 2,
		ReservationDeadline: "2026-11-25T15:30:00Z"}}}, &allocs)
	g.Expect(allocs.Pods[0].PodID.Namespace).To(Equal("ns"))
	g.Expect(allocs.Pods[0].addresses()).To(Equal([]string{"10.1.1.2", "fd00::2"}))
	g.Expect(allocs.Pods[0].ReservationDeadline).To(Equal("2026-11-25T15:30:00Z"))

	var stats nodeStats
	strict(ipam.NodeStats{Pools: []ipam.PoolStats{{CIDR: "10.1.1.0/24", Family: "ipv4", Total: 253, Assigned: 1, Cooldown: 2,
		Excluded: 3, Free: 247, Revoked: true}}, Total: 253, Assigned: 1, Cooldown: 2, Excluded: 3, Free: 247, Reservations: 1,
		CooldownReused: 4}, &stats)
	g.Expect(stats.Pools[0].Revoked).To(BeTrue())
	g.Expect(stats.CooldownReused).To(Equal(uint64(4)))

	// GET /contiv/v1/ipam: the fields the view reads.
	var info ipamInfo
	data, err := json.Marshal(ipam.NodeIPAMInfo{NodeID: 3, NodeName: "n", NodeIP: "1.2.3.4", PodSubnetThisNode: "10.1.3.0/24",
		VppHostNetwork: "172.30.3.0/24", DualStack: &ipam.FamilyInfo{PodSubnetThisNode: "fd00::/64", PodGatewayIP: "fd00::1",
			NatLoopbackIP: "fd00::fffe", VppHostNetwork: "fd30::/64", NodeIP: "fe10::3", VxlanIP: "fd31::3"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(json.Unmarshal(data, &info)).To(Succeed())
	g.Expect(info.DualStack).To(Equal(&familyInfo{PodSubnetThisNode: "fd00::/64", PodGatewayIP: "fd00::1",
		NatLoopbackIP: "fd00::fffe", VppHostNetwork: "fd30::/64", NodeIP: "fe10::3", VxlanIP: "fd31::3"}))
	g.Expect(info.NodeIP).To(Equal("1.2.3.4"))
}

// The primary family's gateway, NAT loopback and VXLAN address are
// derived as the agent derives them.
func TestPrimaryFamily(t *testing.T) {
	g := NewWithT(t)
	var info ipamInfo
	g.Expect(json.Unmarshal([]byte(sampleIPAMInfo), &info)).To(Succeed())
	g.Expect(primaryFamily(&info)).To(Equal(familyView{Family: "ipv4", PodSubnet: "10.1.1.0/24", PodGateway: "10.1.1.1",
		NatLoopback: "10.1.1.254", VppHostNetwork: "172.30.1.0/24", VxlanIP: "192.168.30.1", NodeIP: "192.168.16.1"}))
	info = ipamInfo{NodeID: 5, PodSubnetThisNode: "fd00:1::/112"}
	g.Expect(primaryFamily(&info)).To(Equal(familyView{Family: "ipv6", PodSubnet: "fd00:1::/112", PodGateway: "fd00:1::1",
		NatLoopback: "fd00:1::fffe"}))
}

// A reply that is not the agent's JSON is an error naming the call.
func TestIPAMBadReply(t *testing.T) {
	g := NewWithT(t)
	agent := newFakeAgent(t)
	agent.reply(http.MethodGet, ipamPath, http.StatusOK, "<html>")
	res := netctl(t, nil, "", "-server", agent.URL, "ipam")
	g.Expect(res.code).To(Equal(exitError))
	g.Expect(res.stderr).To(HavePrefix(`contiv-netctl: ipam: GET ` + agent.URL + `/contiv/v1/ipam: the reply "<html>": `))
	agent.reply(http.MethodGet, ipamPath, http.StatusServiceUnavailable, `{"error": "IPAM not ready"}`)
	res = netctl(t, nil, "", "-server", agent.URL, "ipam")
	g.Expect(res.stderr).To(ContainSubstring("503 Service Unavailable: IPAM not ready"))
}
