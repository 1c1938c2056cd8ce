package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/plugins/ksr/model/agentstatus"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	"github.com/contiv-ipam/agent/plugins/ksr/model/node"
	"github.com/contiv-ipam/agent/plugins/ksr/model/poolblock"
	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
)

// update rewrites testdata/golden/*.txt from the output of this build.
var update = flag.Bool("update", false, "rewrite testdata/golden/*.txt with the output of this build")

// goldenNow is the clock of the golden runs: every time of the fixture
// is relative to it.
var goldenNow = time.Date(2026, 11, 25, 15, 0, 0, 0, time.UTC)

// presenceTTL is the TTL of the fixture's presence leases: long enough
// that the remaining TTL reads as the same minutes during the test.
const presenceTTL = 4000

// fixture is the golden fixture: an embedded etcd holding the records of
// five nodes, and the fake agents of two of them.
//
//   - worker-1: node ID 1, Kubernetes Node with pod CIDRs, agent ready
//     (agent1), present;
//   - worker-2: node ID 2, Kubernetes Node without pod CIDRs, two pool
//     blocks granted, agent not ready (agent2), present;
//   - worker-3: node ID 3, no Node, stale status naming a closed server,
//     no presence key;
//   - worker-4: a Kubernetes Node only;
//   - worker-5: a presence key without a status record.
type fixture struct {
	etcd           *etcdtest.Server
	agent1, agent2 *fakeAgent
	dead           string // the REST URL of worker-3's (closed) agent
	// ports maps each agent's host:port to a placeholder of the same
	// length, for stable goldens.
	ports *strings.Replacer
}

func newCluster(t *testing.T) *fixture {
	t.Helper()
	c := &fixture{etcd: etcdtest.Start(t), agent1: newFakeAgent(t), agent2: newFakeAgent(t)}
	dead := httptest.NewServer(http.NotFoundHandler())
	c.dead = dead.URL
	dead.Close()
	var pairs []string
	for i, u := range []string{c.agent1.URL, c.agent2.URL, c.dead} {
		host := strings.TrimPrefix(u, "http://")
		_, port, _ := strings.Cut(host, ":")
		pairs = append(pairs, host, "127.0.0.1:"+placeholder(i+1, len(port)))
	}
	etcdHost := strings.TrimPrefix(c.etcd.ClientURL(), "http://")
	_, etcdPort, _ := strings.Cut(etcdHost, ":")
	pairs = append(pairs, etcdHost, "127.0.0.1:"+strings.Repeat("E", len(etcdPort)))
	c.ports = strings.NewReplacer(pairs...)

	cli := c.etcd.Client(t)
	ctx := t.Context()
	put := func(key, value string, opts ...clientv3.OpOption) {
		t.Helper()
		if _, err := cli.Put(ctx, key, value, opts...); err != nil {
			t.Fatal(err)
		}
	}
	mustJSON := func(b []byte, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, rec := range []*vppnode.VppNode{
		{Id: 1, Name: "worker-1", IpAddresses: []string{"192.168.16.1/24", "fe10::1/64"}},
		{Id: 2, Name: "worker-2", IpAddresses: []string{"192.168.16.2/24"}},
		{Id: 3, Name: "worker-3", IpAddress: "192.168.16.3/24"},
	} {
		put(codec.KSRPrefix+vppnode.Key(rec.Id), mustJSON(codec.Marshal(rec)))
	}
	for _, rec := range []*node.Node{
		{Name: "worker-1", Pod_CIDR: "10.1.1.0/24", Pod_CIDRs: []string{"10.1.1.0/24", "fd00:10:1:1::/64"},
			Addresses: []*node.NodeAddress{{Type: node.NodeAddress_NodeInternalIP, Address: "10.0.0.1"},
				{Type: node.NodeAddress_NodeHostName, Address: "worker-1"}}},
		{Name: "worker-2", Addresses: []*node.NodeAddress{{Type: node.NodeAddress_NodeInternalIP, Address: "10.0.0.2"}}},
		{Name: "worker-4", Pod_CIDR: "10.1.4.0/24", Addresses: []*node.NodeAddress{{Type: node.NodeAddress_NodeInternalIP, Address: "10.0.0.4"}}},
	} {
		put(codec.KSRPrefix+node.Key(rec.Name), mustJSON(codec.Marshal(rec)))
	}
	put(codec.KSRPrefix+poolblock.GrantKey("worker-2"), `{"node": "worker-2", "blocks": ["10.2.0.0/26", "10.2.0.64/26"]}`)
	for _, name := range []string{"worker-1", "worker-2", "worker-5"} {
		lease, err := cli.Grant(ctx, presenceTTL)
		if err != nil {
			t.Fatal(err)
		}
		put(vppnode.PresenceKey(name), `{"node": "`+name+`", "host": "h", "pid": 1}`, clientv3.WithLease(lease.ID))
	}
	for _, st := range []agentstatus.Status{
		{Version: 1, Node: "worker-1", NodeID: 1, REST: c.agent1.URL, Ready: true, Pods: 2, ReleaseCandidates: 1,
			Pools: []agentstatus.Pool{{Name: "10.1.1.0/24", Family: 4, Prefix: "10.1.1.0/24", Used: 3, Total: 253},
				{Name: "fd00:10:1:1::/64", Family: 6, Prefix: "fd00:10:1:1::/64", Used: 3, Total: 1 << 20}},
			Updated: goldenNow.Add(-10 * time.Second), PeriodSeconds: 30},
		{Version: 1, Node: "worker-2", NodeID: 2, REST: c.agent2.URL, Ready: false, Pods: 1,
			Pools: []agentstatus.Pool{{Name: "10.1.2.0/24", Family: 4, Prefix: "10.1.2.0/24", Used: 1, Total: 253},
				{Name: "10.2.0.0/26", Family: 4, Prefix: "10.2.0.0/26", Used: 0, Total: 64}},
			Updated: goldenNow.Add(-20 * time.Second), PeriodSeconds: 30},
		{Version: 1, Node: "worker-3", NodeID: 3, REST: c.dead, Ready: true, Pods: 7,
			Pools:   []agentstatus.Pool{{Name: "10.1.3.0/24", Family: 4, Prefix: "10.1.3.0/24", Used: 7, Total: 253}},
			Updated: goldenNow.Add(-10 * time.Minute), PeriodSeconds: 30},
	} {
		put(agentstatus.Key(st.Node), mustJSON(st.Encode()))
	}

	c.agent1.reply(http.MethodGet, allocationsPath, http.StatusOK, `{"Pods": [
  {"PodID": {"Name": "web-0", "Namespace": "default"}, "MainIP": "10.1.1.2", "IPs": ["10.1.1.2", "fd00:10:1:1::2"],
   "network": "k8s-pod-network", "containerId": "3f2a9c1e0b7d4e5f8a9b0c1d", "ifName": "eth0", "allocatedAt": "2026-11-25T14:55:00Z"},
  {"PodID": {"Name": "coredns-1", "Namespace": "kube-system"}, "MainIP": "10.1.1.3", "IPs": ["10.1.1.3", "fd00:10:1:1::3"]},
  {"PodID": {"Name": "router", "Namespace": "_owner"}, "MainIP": "10.1.1.9", "owner": "router", "seq": 1,
   "reservationDeadline": "2026-11-25T15:30:00Z"}
]}`)
	c.agent2.reply(http.MethodGet, allocationsPath, http.StatusOK, `{"Pods": [
  {"PodID": {"Name": "db-0", "Namespace": "prod"}, "MainIP": "10.1.2.2", "network": "k8s-pod-network",
   "containerId": "c2", "ifName": "eth0", "allocatedAt": "2026-11-24T09:00:00Z"}
]}`)
	c.agent1.reply(http.MethodGet, ipamPath, http.StatusOK, sampleIPAMInfo)
	c.agent1.reply(http.MethodGet, poolsPath, http.StatusOK, `{"pools": [
  {"cidr": "10.1.1.0/24", "family": "ipv4", "total": 253, "assigned": 146, "cooldown": 2, "excluded": 0, "free": 105},
  {"cidr": "10.1.9.0/26", "family": "ipv4", "total": 64, "assigned": 60, "cooldown": 0, "excluded": 1, "free": 3, "revoked": true},
  {"cidr": "fd00:10:1:1::/64", "family": "ipv6", "total": 1048576, "assigned": 148, "cooldown": 0, "excluded": 0, "free": 1048428}
], "total": 1048893, "assigned": 354, "cooldown": 2, "excluded": 1, "free": 1048536, "reservations": 1, "cooldownReused": 0}`)
	c.agent1.reply(http.MethodGet, candidatesPath, http.StatusOK, `{"running": true, "gracePeriod": "10m0s", "candidates": [
  {"pod": "default/gone-0", "uid": "u1", "ips": ["10.1.1.7"], "missingSince": "2026-11-25T14:52:00Z", "releaseAt": "2026-11-25T15:02:00Z"}
]}`)
	c.agent2.reply(http.MethodGet, ipamPath, http.StatusOK, `{"nodeId": 2, "nodeName": "worker-2", "nodeIP": "192.168.16.2",
  "podSubnetThisNode": "10.1.2.0/24", "vppHostNetwork": "172.30.2.0/24", "config": {"vxlanCIDR": "192.168.30.0/24"}}`)
	c.agent2.reply(http.MethodGet, poolsPath, http.StatusOK, `{"pools": [
  {"cidr": "10.1.2.0/24", "family": "ipv4", "total": 253, "assigned": 1, "cooldown": 0, "excluded": 0, "free": 252}
], "total": 253, "assigned": 1, "free": 252, "reservations": 0}`)
	c.agent2.reply(http.MethodGet, candidatesPath, http.StatusOK, `{"running": false, "blocked": "no fresh contiv-ksr mirror marker",
  "gracePeriod": "10m0s", "candidates": []}`)
	return c
}

// sampleIPAMInfo is GET /contiv/v1/ipam of worker-1, dual-stack.
const sampleIPAMInfo = `{"nodeId": 1, "nodeName": "worker-1", "nodeIP": "192.168.16.1",
  "podSubnetThisNode": "10.1.1.0/24", "vppHostNetwork": "172.30.1.0/24",
  "dualStack": {"podSubnetThisNode": "fd00:10:1:1::/64", "podGatewayIP": "fd00:10:1:1::1",
    "natLoopbackIP": "fd00:10:1:1:ffff:ffff:ffff:fffe", "vppHostNetwork": "fd30:1::/64", "nodeIP": "fe10::1", "vxlanIP": "fd31::1"},
  "config": {"podSubnetCIDR": "10.1.0.0/16", "vxlanCIDR": "192.168.30.0/24", "nodeInterconnectCIDR": "192.168.16.0/24"},
  "absentPodReleases": {"enabled": true}}`

// placeholder is "PORT<i>" cut or padded with "0" to n characters.
func placeholder(i, n int) string {
	s := fmt.Sprintf("P%d", i)
	for len(s) < n {
		s = "P" + s
	}
	return s[len(s)-n:]
}

// ttlField is the remaining TTL of a lease in the JSON and YAML output,
// which moves while the test runs.
var ttlField = regexp.MustCompile(`("ttlSeconds": |ttlSeconds: )\d+`)

// runAt runs contiv-netctl in-process at goldenNow with etcd and -server
// pointing at the fixture.
func (c *fixture) runAt(t *testing.T, env map[string]string, tty bool, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	if env == nil {
		env = map[string]string{}
	}
	env[envEtcd] = c.etcd.ClientURL()
	if _, ok := env[envServer]; !ok {
		env[envServer] = c.agent1.URL
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	code := run(ctx, args, &cmdIO{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, env: lookup,
		now: func() time.Time { return goldenNow }, tty: tty})
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// normalize replaces the fixture's ports and the moving lease TTLs.
func (c *fixture) normalize(s string) string {
	s = c.ports.Replace(s)
	return ttlField.ReplaceAllString(s, "${1}TTL")
}

// golden compares res with testdata/golden/name.txt (or rewrites it with
// -update).
func golden(t *testing.T, c *fixture, name string, args []string, res result) {
	t.Helper()
	got := fmt.Sprintf("$ contiv-netctl %s\n# exit %d\n# stdout\n%s# stderr\n%s", strings.Join(args, " "), res.code,
		c.normalize(res.stdout), c.normalize(res.stderr))
	path := filepath.Join("testdata", "golden", name+".txt")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update to write it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("%s differs from %s (go test -run %s -update rewrites it):\n--- got\n%s\n--- want\n%s", name, path, t.Name(), got, want)
	}
}

// Every command and format against the fixture, compared with its
// golden file.
func TestGolden(t *testing.T) {
	c := newCluster(t)
	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"nodes", []string{"nodes"}, exitOK},
		{"nodes-wide", []string{"nodes", "-o", "wide"}, exitOK},
		{"nodes-json", []string{"nodes", "-o", "json"}, exitOK},
		{"nodes-yaml", []string{"nodes", "-o", "yaml"}, exitOK},
		{"nodes-name", []string{"nodes", "-o", "name"}, exitOK},
		{"pods", []string{"pods"}, exitError},
		{"pods-wide", []string{"pods", "-o", "wide"}, exitError},
		{"pods-json", []string{"pods", "-o", "json"}, exitError},
		{"pods-yaml", []string{"pods", "-o", "yaml"}, exitError},
		{"pods-name", []string{"pods", "-o", "name"}, exitError},
		{"pods-node", []string{"pods", "--node", "worker-1"}, exitOK},
		{"pods-namespace", []string{"pods", "-node", "worker-2", "-namespace", "prod"}, exitOK},
		{"pods-node-stale", []string{"pods", "-node", "worker-3"}, exitError},
		{"pods-node-unknown", []string{"pods", "-node", "worker-9"}, exitError},
		{"ipam", []string{"ipam"}, exitOK},
		{"ipam-wide", []string{"ipam", "-o", "wide"}, exitOK},
		{"ipam-json", []string{"ipam", "-o", "json"}, exitOK},
		{"ipam-yaml", []string{"ipam", "-o", "yaml"}, exitOK},
		{"ipam-node", []string{"ipam", "worker-2"}, exitOK},
		{"ipam-node-json", []string{"ipam", "worker-2", "-o", "json"}, exitOK},
		{"ipam-node-stale", []string{"ipam", "worker-3"}, exitError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := c.runAt(t, nil, false, tc.args...)
			NewWithT(t).Expect(res.code).To(Equal(tc.code), "stdout: %s\nstderr: %s", res.stdout, res.stderr)
			golden(t, c, tc.name, tc.args, res)
		})
	}
}
