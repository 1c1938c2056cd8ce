package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/kvdb/bolt"
	"github.com/contiv-ipam/agent/plugins/ipam/checkpoint"
	"github.com/contiv-ipam/agent/tests/testenv"
)

// TestMain builds the agent, contiv-cni and contiv-netctl (testenv.Main)
// for the end-to-end test; with -short it builds nothing and that test is
// skipped.
func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	testenv.Main(m)
}

// e2eUser is the basic-auth user of the agents of the end-to-end test.
const e2eUser = "admin:s3cret"

// startE2EAgent starts a dual-stack agent that authenticates its clients.
func startE2EAgent(t *testing.T, node string) *testenv.Agent {
	t.Helper()
	return testenv.StartAgent(t, testenv.Options{Node: node, BasicAuth: e2eUser,
		Conf: map[string]string{"contiv.conf": testenv.DualStackConf(t)}})
}

// binNetctl runs the contiv-netctl binary against a.
func binNetctl(t *testing.T, a *testenv.Agent, args ...string) result {
	t.Helper()
	return binNetctlEnv(t, []string{envServer + "=" + a.REST, envUser + "=" + e2eUser}, args...)
}

// binNetctlEnv runs the contiv-netctl binary with env added to this
// process's environment.
func binNetctlEnv(t *testing.T, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(testenv.Binaries().NetCtl, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// cniAdd runs contiv-cni ADD for pod default/name, container cid, on a.
func cniAdd(t *testing.T, a *testenv.Agent, name, cid string) {
	t.Helper()
	cniAddAt(t, a.Socket, "default", name, cid)
}

// cniAddAt runs contiv-cni ADD for pod ns/name, container cid, on the
// agent of the CNI socket.
func cniAddAt(t *testing.T, socket, ns, name, cid string) {
	t.Helper()
	cmd := exec.Command(testenv.Binaries().CNI)
	cmd.Env = append(os.Environ(), "CNI_COMMAND=ADD", "CNI_CONTAINERID="+cid, "CNI_NETNS=/var/run/netns/"+cid,
		"CNI_IFNAME=eth0", "CNI_PATH="+testenv.Binaries().Dir,
		"CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE="+ns+";K8S_POD_NAME="+name+";K8S_POD_INFRA_CONTAINER_ID="+cid)
	cmd.Stdin = strings.NewReader(`{"cniVersion": "1.0.0", "name": "k8s-pod-network", "type": "contiv-cni", "grpcServer": "` + socket + `"}`)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("contiv-cni ADD %s: %v: %s", name, err, out)
	}
}

// operator sends an operator call to a as the e2e user.
func operator(t *testing.T, a *testenv.Agent, call, body string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, a.REST+"/contiv/v1/ipam/operator/"+call, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	user, pass, _ := strings.Cut(e2eUser, ":")
	req.SetBasicAuth(user, pass)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("operator %s %s: %d", call, body, resp.StatusCode)
	}
}

// view is what an agent shows of its allocations: GET allocations, and
// the per-family maps of GET dump.
func view(t *testing.T, a *testenv.Agent) (string, string) {
	t.Helper()
	code, allocs := a.Get(t, "/contiv/v1/ipam/allocations")
	if code != http.StatusOK {
		t.Fatalf("GET allocations: %d %s", code, allocs)
	}
	code, dump := a.Get(t, "/contiv/v1/ipam/dump")
	if code != http.StatusOK {
		t.Fatalf("GET dump: %d %s", code, dump)
	}
	var d struct {
		IPv4 map[string]string `json:"ipv4"`
		IPv6 map[string]string `json:"ipv6"`
	}
	if err := json.Unmarshal(dump, &d); err != nil {
		t.Fatal(err)
	}
	maps, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return string(allocs), string(maps)
}

// Export from an agent with a pod, an owner's allocation and a
// reservation with the contiv-netctl binary; import into a second, fresh
// agent: the same allocations.
func TestEndToEndExportImport(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no agent binaries")
	}
	g := NewWithT(t)
	src := startE2EAgent(t, "netctl-src")
	cniAdd(t, src, "web-0", "c1")
	code, info := src.Get(t, "/contiv/v1/ipam")
	g.Expect(code).To(Equal(http.StatusOK))
	var ipamInfo struct {
		PodSubnetThisNode string `json:"podSubnetThisNode"`
	}
	g.Expect(json.Unmarshal(info, &ipamInfo)).To(Succeed())
	subnet := netip.MustParsePrefix(ipamInfo.PodSubnetThisNode)
	ip := subnet.Addr()
	for range 10 {
		ip = ip.Next()
	}
	operator(t, src, "allocate", `{"ip": "`+ip.String()+`", "owner": "appliance"}`)
	operator(t, src, "reserve", `{"owner": "router", "timeout": "30m"}`)
	wantAllocs, wantAddrs := view(t, src)

	file := filepath.Join(t.TempDir(), "src.json")
	res := binNetctl(t, src, "ipam", "checkpoint", "export", "-o", file)
	g.Expect(res.code).To(Equal(exitOK), res.stderr)
	g.Expect(res.stdout).To(HavePrefix(`exported 3 allocations of node "netctl-src"`))
	data, err := os.ReadFile(file)
	g.Expect(err).NotTo(HaveOccurred())
	exported, err := checkpoint.Decode(data)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(exported.Allocations).To(HaveLen(3))

	dst := startE2EAgent(t, "netctl-dst")
	res = binNetctl(t, dst, "ipam", "checkpoint", "import", file)
	g.Expect(res.code).To(Equal(exitOK), res.stderr)
	g.Expect(res.stdout).To(HavePrefix(`imported 3 allocations, skipped 0 (from ` + file + `: 3 allocations of node "netctl-src"`))
	gotAllocs, gotAddrs := view(t, dst)
	g.Expect(gotAllocs).To(MatchJSON(wantAllocs))
	g.Expect(gotAddrs).To(MatchJSON(wantAddrs))

	again := filepath.Join(t.TempDir(), "dst.json")
	res = binNetctl(t, dst, "ipam", "checkpoint", "export", "-o", again)
	g.Expect(res.code).To(Equal(exitOK), res.stderr)
	data, err = os.ReadFile(again)
	g.Expect(err).NotTo(HaveOccurred())
	reexported, err := checkpoint.Decode(data)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reexported.Node).To(Equal("netctl-dst"))
	g.Expect(reexported.Allocations).To(Equal(exported.Allocations), "the same entries: keys, addresses, pools, times, reservation")

	res = binNetctl(t, dst, "ipam", "checkpoint", "import", file)
	g.Expect(res.code).To(Equal(exitError))
	g.Expect(res.stderr).To(ContainSubstring("409 Conflict: importing a checkpoint: 3 allocations held: the node holds allocations"))
	t.Run("replace", func(t *testing.T) {
		g := NewWithT(t)
		res := binNetctl(t, dst, "ipam", "checkpoint", "import", "-replace", file)
		g.Expect(res.code).To(Equal(exitOK), res.stderr)
		gotAllocs, _ := view(t, dst)
		g.Expect(gotAllocs).To(MatchJSON(wantAllocs))
	})
}

// storeRecord stops a (SIGINT: it releases the bolt file), writes key =
// value into its bolt file (bolt.conf's db-path, read as the agent reads
// it) and starts it again.
func storeRecord(t *testing.T, a *testenv.Agent, key, value string) {
	t.Helper()
	if err := a.Stop(t); err != nil {
		t.Fatalf("stopping the agent: %v; log in %s", err, a.LogPath())
	}
	db := bolt.NewPlugin(bolt.UseDeps(func(d *bolt.Deps) {
		d.Cfg = config.ForPlugin("bolt", config.WithPath(filepath.Join(a.Dir, "bolt.conf")))
		d.Log = slog.New(slog.NewTextHandler(t.Output(), nil))
	}))
	if err := db.Init(); err != nil {
		t.Fatalf("opening the agent's bolt file: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := db.Put(ctx, key, []byte(value)); err != nil {
		t.Fatalf("writing %s: %v", key, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	a.Start(t)
}

// A pod record outside the node's pod subnet, written into the agent's
// bolt file while it is stopped, is moved aside at start-up: the
// contiv-netctl binary lists it, cannot restore it, and discards it; the
// pod allocation of the node is left alone.
func TestEndToEndConflicts(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no agent binaries")
	}
	g := NewWithT(t)
	a := startE2EAgent(t, "netctl-conflicts")
	cniAdd(t, a, "web-0", "c1")
	wantAllocs, _ := view(t, a)
	storeRecord(t, a, "/contiv-agent/ipam/pods/default/stale-0", "9.9.9.9")

	code, body := a.Get(t, "/contiv/v1/ipam/conflicts")
	g.Expect(code).To(Equal(http.StatusOK), string(body))
	var list conflictList
	g.Expect(json.Unmarshal(body, &list)).To(Succeed())
	g.Expect(list.Conflicts).To(HaveLen(1), string(body))
	moved := list.Conflicts[0]
	g.Expect(moved.Name).To(Equal("default/stale-0"))
	g.Expect(moved.IP).To(Equal("9.9.9.9"))
	g.Expect(moved.Key).To(Equal("/contiv-agent/ipam/pods/default/stale-0"))
	g.Expect(moved.Value).To(Equal("9.9.9.9"))
	g.Expect(moved.Reason).NotTo(BeEmpty())

	res := binNetctl(t, a, "ipam", "conflicts")
	g.Expect(res.code).To(Equal(exitOK), res.stderr)
	lines := strings.Split(strings.TrimSuffix(res.stdout, "\n"), "\n")
	g.Expect(lines).To(HaveLen(2), res.stdout)
	g.Expect(strings.Fields(lines[0])).To(Equal([]string{"NAME", "POD", "IPS", "KEPT-FOR", "AT", "REASON"}))
	g.Expect(strings.Fields(lines[1])[:5]).To(Equal([]string{"default/stale-0", "default/stale-0", "9.9.9.9", "-", moved.At}))
	g.Expect(lines[1]).To(HaveSuffix(moved.Reason))

	res = binNetctl(t, a, "ipam", "conflicts", "restore", "default/stale-0")
	g.Expect(res.code).To(Equal(exitError))
	g.Expect(res.stderr).To(HavePrefix(`contiv-netctl: ipam conflicts restore "default/stale-0": POST ` + a.REST +
		`/contiv/v1/ipam/operator/conflicts/restore: 409 Conflict: conflict "default/stale-0": the record cannot be restored: 9.9.9.9 is not in a pod subnet or pool of this node`))
	g.Expect(res.stderr).To(ContainSubstring("(cannot-restore: "))

	res = binNetctl(t, a, "ipam", "conflicts", "discard", "default/stale-1")
	g.Expect(res.code).To(Equal(exitError))
	g.Expect(res.stderr).To(ContainSubstring(`404 Not Found: conflict "default/stale-1": no record moved aside under that name (no-such-conflict: `))

	res = binNetctl(t, a, "ipam", "conflicts", "discard", "default/stale-0")
	g.Expect(res.code).To(Equal(exitOK), res.stderr)
	g.Expect(res.stdout).To(Equal(`discarded conflict "default/stale-0"` + "\n"))

	res = binNetctl(t, a, "ipam", "conflicts")
	g.Expect(res.code).To(Equal(exitOK), res.stderr)
	g.Expect(res.stdout).To(Equal("no conflicts: every stored allocation record was placed\n"))
	gotAllocs, _ := view(t, a)
	g.Expect(gotAllocs).To(MatchJSON(wantAllocs), "the pod allocation of the node is left alone")

	res = binNetctl(t, a, "ipam", "conflicts", "discard", "default/stale-0")
	g.Expect(res.code).To(Equal(exitError), "discarded once")
	g.Expect(res.stderr).To(ContainSubstring("(no-such-conflict: "))

	// The agent's Kubernetes state holds no pod (no contiv-ksr here): no
	// evidence, so web-0 is no release candidate.
	res = binNetctl(t, a, "ipam", "check")
	g.Expect(res.code).To(Equal(exitOK), res.stderr)
	g.Expect(res.stdout).To(HavePrefix("no release candidates: "))
}

// podIPs are the addresses of each pod of a ("namespace/name"), from GET
// allocations.
func podIPs(t *testing.T, a *testenv.Agent) map[string][]string {
	t.Helper()
	code, body := a.Get(t, "/contiv/v1/ipam/allocations")
	if code != http.StatusOK {
		t.Fatalf("GET allocations: %d %s", code, body)
	}
	var allocs struct {
		Pods []struct {
			PodID struct{ Name, Namespace string } `json:"PodID"`
			IPs   []string                         `json:"IPs"`
		} `json:"Pods"`
	}
	if err := json.Unmarshal(body, &allocs); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, p := range allocs.Pods {
		out[p.PodID.Namespace+"/"+p.PodID.Name] = p.IPs
	}
	return out
}

// The contiv-netctl binary against a real agent: ipam check -o json
// writes a report of the agent's node; ipam release -from-report releases
// the addresses of a pod that still holds them (both families, CNI
// attachment or not), and skips an address another pod holds and a free
// one; that other pod keeps its addresses.
func TestEndToEndReleaseFromReport(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no agent binaries")
	}
	g := NewWithT(t)
	a := startE2EAgent(t, "netctl-release")
	cniAdd(t, a, "web-0", "c1")
	cniAdd(t, a, "db-0", "c2")
	held := podIPs(t, a)
	web, db := held["default/web-0"], held["default/db-0"]
	g.Expect(web).To(HaveLen(2), "dual-stack")
	g.Expect(db).To(HaveLen(2))
	code, info := a.Get(t, "/contiv/v1/ipam")
	g.Expect(code).To(Equal(http.StatusOK))
	var node struct {
		PodSubnetThisNode string `json:"podSubnetThisNode"`
	}
	g.Expect(json.Unmarshal(info, &node)).To(Succeed())
	free := netip.MustParsePrefix(node.PodSubnetThisNode).Addr()
	for range 10 {
		free = free.Next()
	}

	res := binNetctl(t, a, "ipam", "check", "-o", "json")
	g.Expect(res.code).To(Equal(exitOK), res.stderr)
	var rep report
	g.Expect(json.Unmarshal([]byte(res.stdout), &rep)).To(Succeed(), res.stdout)
	g.Expect(rep.Version).To(Equal(reportVersion))
	g.Expect(rep.Node).To(Equal("netctl-release"))
	g.Expect(rep.Server).To(Equal(a.REST))
	g.Expect(rep.Candidates).To(BeEmpty(), "no Kubernetes state here (no contiv-ksr): no evidence, no candidates")

	// The operator's reviewed report: web-0, an address of db-0 listed
	// for db-1, and a free address.
	rep.Candidates = []candidate{{Pod: "default/web-0", IPs: web}, {Pod: "default/db-1", IPs: db[:1]},
		{Pod: "default/gone-0", IPs: []string{free.String()}}}
	data, err := json.Marshal(rep)
	g.Expect(err).NotTo(HaveOccurred())
	file := filepath.Join(t.TempDir(), "report.json")
	g.Expect(os.WriteFile(file, data, 0o600)).To(Succeed())

	res = binNetctl(t, a, "ipam", "release", "--from-report", file)
	g.Expect(res.code).To(Equal(exitOK), res.stderr)
	g.Expect(res.stdout).To(Equal("released " + web[0] + " (pod default/web-0)\n" +
		"released " + web[1] + " (pod default/web-0; with " + web[0] + ")\n" +
		"skipped " + db[0] + " (pod default/db-1): moved: releasing " + db[0] + " of pod default/db-1: held by another pod or owner: " +
		"attachment k8s-pod-network/c2/eth0 of pod default/db-0 holds it\n" +
		"skipped " + free.String() + " (pod default/gone-0): free: no allocation holds it\n" +
		"released 2, skipped 2, failed 0 of 4 addresses in " + file + ` (node "netctl-release", taken at ` + rep.TakenAt + ")\n"))
	g.Expect(podIPs(t, a)).To(Equal(map[string][]string{"default/db-0": db}), "web-0 released, db-0 left alone")

	res = binNetctl(t, a, "ipam", "release", "-from-report", file)
	g.Expect(res.code).To(Equal(exitOK), res.stderr)
	g.Expect(res.stdout).To(ContainSubstring("skipped " + web[0] + " (pod default/web-0): free: no allocation holds it\n"))
	g.Expect(res.stdout).To(ContainSubstring("released 0, skipped 4, failed 0 of 4"))
}
