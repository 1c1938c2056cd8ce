package resync

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/plugins/controller"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	"github.com/contiv-ipam/agent/plugins/podmanager/cni"
	"github.com/contiv-ipam/agent/tests/bench/internal/agentproc"
	"github.com/contiv-ipam/agent/tests/testenv"
)

// putBatch is the number of keys written per etcd transaction (etcd's
// default --max-txn-ops is 128).
const putBatch = 128

// addCallers add the local pods concurrently through the CNI socket.
const addCallers = 16

// BenchmarkAgentRestart runs the real agent (tests/testenv's binary) on an
// etcd server in this process that holds 1,000 nodes and 100,000 pods
// under the KSR prefix, with the 250 addresses of this node's pods in its
// bolt file (made through the CNI gRPC socket by a first run, before the
// pods are written). A first restart mirrors the 100,000 keys into bolt
// (cold-mirror-ms); each timed op is one more restart: exec to /readiness
// 200, after which the 250 allocations must be there.
func BenchmarkAgentRestart(b *testing.B) {
	for _, s := range []shape{big, bigCluster, small} {
		b.Run(fmt.Sprintf("etcd=external,pods=%d,nodes=%d,layout=%s", s.pods, s.nodes, s.layout), func(b *testing.B) {
			benchRestart(b, s)
		})
	}
}

// benchRestart is one case of BenchmarkAgentRestart.
func benchRestart(b *testing.B, s shape) {
	env := newRestartEnv(b, s)
	var starts, resyncs, lists time.Duration
	var peak float64
	for b.Loop() {
		a, took := env.start(b)
		b.StopTimer()
		starts += took
		r, l, rss := env.measure(b, a)
		resyncs, lists, peak = resyncs+r, lists+l, max(peak, rss)
		if err := a.Stop(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	n := float64(b.N)
	b.ReportMetric(ms(starts)/n, "ms")
	b.ReportMetric(ms(resyncs)/n, "resync-ms")
	b.ReportMetric(ms(lists)/n, "list-ms")
	b.ReportMetric(peak, "MiB")
	b.ReportMetric(ms(env.coldMirror), "cold-mirror-ms")
	b.ReportMetric(env.coldPeak, "cold-MiB")
	b.ReportMetric(env.idleRSS(b), "idle-MiB")
}

// idleSettle is how long the agent runs idle after ready before idleRSS
// reads its resident set.
const idleSettle = 5 * time.Second

// imageAgent builds, once, contiv-agent as the image holds it (make
// static: without the embedded etcd server, tag contiv_noembed).
var imageAgent = sync.OnceValues(func() (string, error) {
	out := filepath.Join(testenv.Binaries().Dir, "contiv-agent-image")
	build := exec.Command("go", "build", "-tags", "contiv_noembed", "-o", out, "./cmd/contiv-agent")
	build.Dir, build.Stdout, build.Stderr = testenv.RepoRoot(), os.Stderr, os.Stderr
	return out, build.Run()
})

// idleRSS starts the agent as the image holds it once more (untimed) and
// returns its VmRSS in MiB idleSettle after ready: what an idle agent
// holds.
func (e *restartEnv) idleRSS(b *testing.B) float64 {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	bin, err := imageAgent()
	if err != nil {
		b.Fatal(err)
	}
	a, err := agentproc.StartBinary(bin, e.dir, thisNode)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(a.Kill)
	if err := a.WaitReady(); err != nil {
		b.Fatalf("%v; log in %s", err, filepath.Join(e.dir, "agent.log"))
	}
	defer func() {
		if err := a.Stop(); err != nil {
			b.Error(err)
		}
	}()
	time.Sleep(idleSettle)
	rss, err := a.RSS()
	if err != nil {
		b.Fatal(err)
	}
	return rss
}

// withPodLayout is the controller.conf conf with its podLayout key set
// to layout.
func withPodLayout(conf, layout string) string {
	var out []string
	for _, line := range strings.Split(conf, "\n") {
		if !strings.HasPrefix(line, "podLayout:") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n") + "\npodLayout: " + layout + "\n"
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// restartEnv is an etcd holding the state and an agent directory whose
// bolt file holds the local allocations and the mirror.
type restartEnv struct {
	s          shape
	dir        string
	coldMirror time.Duration // start to ready of the first start on the whole state
	coldPeak   float64       // its peak RSS, MiB
}

// newRestartEnv writes the nodes to a new etcd, runs the agent once to
// allocate the local pods' addresses over gRPC, writes the pods, and runs
// the agent once more (the cold mirror).
func newRestartEnv(b *testing.B, s shape) *restartEnv {
	b.Helper()
	srv := etcdtest.Start(b)
	cli := srv.Client(b)
	nodes, err := s.nodeKVs()
	if err != nil {
		b.Fatal(err)
	}
	putAll(b, cli, nodes)
	env := &restartEnv{s: s, dir: b.TempDir()}
	files, err := testenv.AgentConfig(env.dir, filepath.Join(env.dir, "cni.sock"))
	if err != nil {
		b.Fatal(err)
	}
	files["etcd.conf"] = fmt.Sprintf("endpoints: [%q]\n", srv.Endpoint())
	files["contiv.conf"] = benchContivConf
	files["controller.conf"] = withPodLayout(files["controller.conf"], s.layout)
	if err := testenv.WriteConfig(env.dir, files); err != nil {
		b.Fatal(err)
	}

	a, _ := env.start(b)
	local := addLocal(b, filepath.Join(env.dir, "cni.sock"), s.local)
	if err := a.Stop(); err != nil {
		b.Fatal(err)
	}
	pods, err := s.podKVs(local)
	if err != nil {
		b.Fatal(err)
	}
	putAll(b, cli, pods)

	a, env.coldMirror = env.start(b)
	_, _, env.coldPeak = env.measure(b, a)
	if err := a.Stop(); err != nil {
		b.Fatal(err)
	}
	return env
}

// start runs the agent and returns it once /readiness answers 200, with
// the time from exec.
func (e *restartEnv) start(b *testing.B) (*agentproc.Proc, time.Duration) {
	b.Helper()
	t0 := time.Now()
	a, err := agentproc.Start(e.dir, thisNode)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(a.Kill)
	if err := a.WaitReady(); err != nil {
		a.Kill()
		b.Fatalf("%v; log in %s", err, filepath.Join(e.dir, "agent.log"))
	}
	return a, time.Since(t0)
}

// measure checks the allocations over REST and returns the processing
// time of the DB resync in the event loop (event history), the DB
// watcher's remote resync (list, decode, mirror; its log line) and the
// peak RSS in MiB.
func (e *restartEnv) measure(b *testing.B, a *agentproc.Proc) (resync, list time.Duration, rss float64) {
	b.Helper()
	rss, err := a.PeakRSS()
	if err != nil {
		b.Fatal(err)
	}
	var allocs struct {
		Pods []testenv.Allocation `json:"Pods"`
	}
	if err := agentproc.GetJSON(a.Rest()+"/contiv/v1/ipam/allocations", &allocs); err != nil {
		b.Fatal(err)
	}
	if len(allocs.Pods) != e.s.local {
		b.Fatalf("%d allocations after the restart, want %d", len(allocs.Pods), e.s.local)
	}
	var history []controller.EventRecord
	if err := agentproc.GetJSON(a.Rest()+controller.EventHistoryPath, &history); err != nil {
		b.Fatal(err)
	}
	for _, r := range history {
		if r.Name == "DB Resync" && r.Error == "" {
			resync = r.ProcessingEnd.Sub(r.ProcessingStart)
			break
		}
	}
	if resync == 0 {
		b.Fatalf("no successful DB Resync in the event history: %+v", history)
	}
	rec := a.Logged("remote resync pushed")
	d, ok := rec["duration"].(float64) // slog's JSON: nanoseconds
	if !ok {
		b.Fatalf("no duration in the \"remote resync pushed\" line: %v", rec)
	}
	return resync, time.Duration(d), rss
}

// putAll writes kvs under the KSR prefix, putBatch keys per transaction.
func putAll(b testing.TB, cli *clientv3.Client, kvs []kv) {
	b.Helper()
	for i := 0; i < len(kvs); i += putBatch {
		var ops []clientv3.Op
		for _, e := range kvs[i:min(i+putBatch, len(kvs))] {
			ops = append(ops, clientv3.OpPut(codec.KSRPrefix+e.key, string(e.value)))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := cli.Txn(ctx).Then(ops...).Commit()
		cancel()
		if err != nil {
			b.Fatalf("writing keys %d..: %v", i, err)
		}
	}
}

// addLocal adds n local pods (network "default", eth0, K8S_POD_NAME and
// K8S_POD_NAMESPACE set) through the agent's CNI socket and returns their
// addresses by pod name.
func addLocal(b *testing.B, socket string, n int) map[string]netip.Addr {
	b.Helper()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	client := cni.NewRemoteCNIClient(conn)
	out := make(map[string]netip.Addr, n)
	var mu sync.Mutex
	var next atomic.Int64
	var wg sync.WaitGroup
	for range addCallers {
		wg.Go(func() {
			for k := int(next.Add(1)) - 1; k < n; k = int(next.Add(1)) - 1 {
				name := localPodName(k)
				a, err := addOne(client, name)
				if err != nil {
					b.Errorf("Add %s: %v", name, err)
					return
				}
				mu.Lock()
				out[name] = a
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	return out
}

// addOne runs one CNI ADD of a local pod and returns its address.
func addOne(client cni.RemoteCNIClient, name string) (netip.Addr, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reply, err := client.Add(ctx, &cni.CNIRequest{
		Version: "1.0.0", ContainerId: "c-" + name, NetworkNamespace: "/var/run/netns/" + name,
		InterfaceName: "eth0", NetworkName: "default",
		ExtraNwConfig:  `{"cniVersion":"1.0.0","name":"default","type":"contiv-cni"}`,
		ExtraArguments: "K8S_POD_NAMESPACE=" + localNamespace + ";K8S_POD_NAME=" + name,
	})
	if err != nil {
		return netip.Addr{}, err
	}
	if reply.GetResult() != cni.CNIReply_OK {
		return netip.Addr{}, fmt.Errorf("code %d: %s", reply.GetErrorCode(), reply.GetError())
	}
	ifs := reply.GetInterfaces()
	if len(ifs) != 1 || len(ifs[0].GetIpAddresses()) != 1 {
		return netip.Addr{}, fmt.Errorf("reply without one address: %v", reply)
	}
	p, err := netip.ParsePrefix(ifs[0].GetIpAddresses()[0].GetAddress())
	return p.Addr(), err
}
