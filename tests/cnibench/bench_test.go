package cnibench

import (
	"context"
	"crypto/sha512"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/contiv-ipam/agent/plugins/podmanager/cni"
	"github.com/contiv-ipam/agent/tests/testenv"
)

// TestMain builds the agent and contiv-cni (testenv.Main) only when
// benchmarks are asked for: the plain test run has nothing to exec.
func TestMain(m *testing.M) { testenv.BenchMain(m) }

const (
	// cniVersion is the newest version Debian's host-local (1.1.1) speaks.
	cniVersion = "1.0.0"
	// debianPlugins is where `make test-deps` puts host-local.
	debianPlugins = "/usr/lib/cni"
	// prefillCallers add the existing allocations concurrently.
	prefillCallers = 16
)

// benchContivConf gives the node a /16 pod subnet (10.129.0.0/16 for node
// ID 1, 65,533 pod addresses), so that thousands of allocations fit; the
// rest is the default addressing.
const benchContivConf = `ipamConfig:
  podSubnetCIDR: 10.128.0.0/9
  podSubnetOneNodePrefixLen: 16
  vppHostSubnetCIDR: 172.30.0.0/16
  vppHostSubnetOneNodePrefixLen: 24
  nodeInterconnectCIDR: 192.168.16.0/24
  vxlanCIDR: 192.168.30.0/24
  serviceCIDR: 10.96.0.0/12
`

// startAgent runs the real agent with the big pod subnet.
func startAgent(b *testing.B) *testenv.Agent {
	b.Helper()
	return testenv.StartAgent(b, testenv.Options{Node: "cnibench-node", Conf: map[string]string{
		"contiv.conf": benchContivConf,
		"ipam.conf":   "absentPodGracePeriod: 1h\nstoreTimeout: 10s\n",
	}})
}

// BenchmarkGRPCAdd measures durable Adds through the real agent's socket:
// callers concurrent clients, one connection each (as many contiv-cni
// processes would have), distinct keys; the keys are deleted after each
// round with the timer stopped. Reports adds/s and the p50/p99 latency.
func BenchmarkGRPCAdd(b *testing.B) {
	a := startAgent(b)
	var round atomic.Int64
	for _, callers := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			clients := dialN(b, a.Socket, callers)
			prefix := fmt.Sprintf("grpc-r%d", round.Add(1))
			b.ResetTimer()
			lat, elapsed := addConcurrently(b, clients, "bench", prefix, b.N)
			b.StopTimer()
			reportLatency(b, lat)
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "adds/s")
			deleteConcurrently(b, clients, "bench", prefix, b.N)
		})
	}
}

// addConcurrently adds n keys "<prefix>-<i>" of network with the clients
// sharing the work; it returns every call's latency and the wall time.
func addConcurrently(b *testing.B, clients []cni.RemoteCNIClient, network, prefix string, n int) ([]time.Duration, time.Duration) {
	b.Helper()
	return timeConcurrently(b, clients, n, func(rc cni.RemoteCNIClient, i int64) error {
		return call(rc.Add, network, fmt.Sprintf("%s-%d", prefix, i))
	})
}

// timeConcurrently runs op for i = 1..n with the clients sharing the
// work; it returns every op's latency and the wall time. An error fails
// b and stops that client.
func timeConcurrently(b *testing.B, clients []cni.RemoteCNIClient, n int, op func(rc cni.RemoteCNIClient, i int64) error) ([]time.Duration, time.Duration) {
	b.Helper()
	var next atomic.Int64
	lats := make([][]time.Duration, len(clients))
	var wg sync.WaitGroup
	start := time.Now()
	for c, rc := range clients {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				t0 := time.Now()
				if err := op(rc, i); err != nil {
					b.Errorf("%v", err)
					return
				}
				lats[c] = append(lats[c], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	return slices.Concat(lats...), elapsed
}

// deleteConcurrently deletes the keys addConcurrently added.
func deleteConcurrently(b *testing.B, clients []cni.RemoteCNIClient, network, prefix string, n int) {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	for _, rc := range clients {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				if err := call(rc.Delete, network, fmt.Sprintf("%s-%d", prefix, i)); err != nil {
					b.Errorf("Delete: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
}

type rpc func(context.Context, *cni.CNIRequest, ...grpc.CallOption) (*cni.CNIReply, error)

// call runs Add or Delete for a plain container's key (network,
// containerID, eth0).
func call(method rpc, network, containerID string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reply, err := method(ctx, &cni.CNIRequest{
		Version: cniVersion, ContainerId: containerID, NetworkNamespace: "/var/run/netns/" + containerID,
		InterfaceName: "eth0", NetworkName: network,
		ExtraNwConfig: fmt.Sprintf(`{"cniVersion":%q,"name":%q,"type":"contiv-cni"}`, cniVersion, network),
	})
	if err != nil {
		return fmt.Errorf("%s/%s/eth0: %w", network, containerID, err)
	}
	if reply.GetResult() != cni.CNIReply_OK {
		return fmt.Errorf("%s/%s/eth0: code %d: %s", network, containerID, reply.GetErrorCode(), reply.GetError())
	}
	return nil
}

// dialN returns n clients of the socket, each on its own connection,
// connected (a DEL of an unknown key, which succeeds) and closed when b
// ends.
func dialN(b *testing.B, socket string, n int) []cni.RemoteCNIClient {
	b.Helper()
	out := make([]cni.RemoteCNIClient, n)
	for i := range out {
		conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatalf("dial %s: %v", socket, err)
		}
		b.Cleanup(func() { _ = conn.Close() })
		out[i] = cni.NewRemoteCNIClient(conn)
		if err := call(out[i].Delete, "warmup", "warmup"); err != nil {
			b.Fatalf("warm-up: %v", err)
		}
	}
	return out
}

// BenchmarkCNIToolFloor measures the exec floor alone: cnitool running a
// plugin that only decodes its config and prints a fixed result.
func BenchmarkCNIToolFloor(b *testing.B) {
	env := newToolEnv(b)
	measureAdds(b, env, env.floor, nil)
}

// BenchmarkCNIToolAdd measures one cnitool exec per ADD (what a runtime
// that execs the plugin pays) with 0, 1,000 and 4,000 allocations
// already held, for contiv-cni (plugin mode, through the real agent) and
// Debian's host-local in the same run. The existing allocations are
// added through gRPC (contiv-cni) and written as lease files
// (host-local); the ADDs of a round are undone after it, timer stopped.
func BenchmarkCNIToolAdd(b *testing.B) {
	a := startAgent(b)
	env := newToolEnv(b)
	contiv := env.network(b, "contiv", fmt.Sprintf(`{"type":"contiv-cni","grpcServer":%q}`, a.Socket))
	dataDir := b.TempDir()
	hostLocal := env.network(b, "hostlocal", fmt.Sprintf(
		`{"type":"host-local","ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":"10.200.0.0/16"}]]}}`, dataDir))
	leases := &leaseDir{dir: filepath.Join(dataDir, hostLocal), next: netip.MustParseAddr("10.200.0.2")}
	clients := dialN(b, a.Socket, prefillCallers)
	have := 0
	for _, existing := range []int{0, 1000, 4000} {
		b.Run(fmt.Sprintf("existing=%d", existing), func(b *testing.B) {
			prefix := fmt.Sprintf("prefill-%d", existing)
			addConcurrently(b, clients, contiv, prefix, existing-have)
			leases.fill(b, existing-have)
			have = existing
			b.Run("plugin=contiv-cni", func(b *testing.B) {
				measureAdds(b, env, contiv, func(ids []string, _ []netip.Addr) {
					for _, id := range ids {
						if err := call(clients[0].Delete, contiv, id); err != nil {
							b.Errorf("Delete: %v", err)
						}
					}
				})
			})
			b.Run("plugin=host-local", func(b *testing.B) {
				measureAdds(b, env, hostLocal, func(_ []string, ips []netip.Addr) { leases.remove(b, ips) })
			})
		})
	}
}

// measureAdds runs b.N cnitool ADDs of network, each with a new netns
// path (so a new container ID), and reports their p50/p99. Unless network
// is the floor itself, each ADD is followed by one of the floor network,
// timer stopped, so that both see the same load of the machine; their
// p50/p99 and the difference of the p50s are reported too. Then undo gets
// the container IDs and addresses of the round, timer stopped.
func measureAdds(b *testing.B, env *toolEnv, network string, undo func(ids []string, ips []netip.Addr)) {
	b.Helper()
	withFloor := network != env.floor
	lat, floor := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
	ids, ips := make([]string, 0, b.N), make([]netip.Addr, 0, b.N)
	for i := 0; i < b.N; i++ {
		ns, d, ip := env.add(b, network)
		lat, ids, ips = append(lat, d), append(ids, cnitoolContainerID(ns)), append(ips, ip)
		if withFloor {
			b.StopTimer()
			_, d, _ = env.add(b, env.floor)
			floor = append(floor, d)
			b.StartTimer()
		}
	}
	b.StopTimer()
	reportLatency(b, lat)
	if withFloor {
		slices.Sort(floor)
		b.ReportMetric(ms(percentile(floor, 0.50)), "floor-p50-ms")
		b.ReportMetric(ms(percentile(floor, 0.99)), "floor-p99-ms")
		b.ReportMetric(ms(percentile(lat, 0.50)-percentile(floor, 0.50)), "over-floor-p50-ms")
	}
	if undo != nil {
		undo(ids, ips)
	}
}

// add runs one `cnitool add` of network with a new netns path; it returns
// the path, the wall time of the exec and the result's first address.
func (e *toolEnv) add(b *testing.B, network string) (string, time.Duration, netip.Addr) {
	b.Helper()
	e.ns++
	ns := filepath.Join(e.dir, fmt.Sprintf("ns-%s-%d", network, e.ns))
	cmd := exec.Command(e.cnitool, "add", network, ns)
	cmd.Env = e.env
	t0 := time.Now()
	out, err := cmd.Output()
	d := time.Since(t0)
	if err != nil {
		b.Fatalf("cnitool add %s %s: %v: %s", network, ns, err, exitStderr(err))
	}
	ip, err := resultIP(out)
	if err != nil {
		b.Fatalf("cnitool add %s: %v in %s", network, err, out)
	}
	return ns, d, ip
}

// cnitoolContainerID is the container ID cnitool derives from the netns
// path (cnitool v1.3.1: "cnitool-" and the hex of the first 10 bytes of
// its SHA-512).
func cnitoolContainerID(netns string) string {
	s := sha512.Sum512([]byte(netns))
	return fmt.Sprintf("cnitool-%x", s[:10])
}

// resultIP is the first address of a printed CNI result.
func resultIP(out []byte) (netip.Addr, error) {
	var r struct {
		IPs []struct {
			Address string `json:"address"`
		} `json:"ips"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return netip.Addr{}, err
	}
	if len(r.IPs) == 0 {
		return netip.Addr{}, fmt.Errorf("no ips in the result")
	}
	p, err := netip.ParsePrefix(r.IPs[0].Address)
	return p.Addr(), err
}

func exitStderr(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return strings.TrimSpace(string(ee.Stderr))
	}
	return ""
}

// toolEnv is what cnitool runs with: its binary, a NETCONFPATH of
// conflists, a CNI_PATH with the floor plugin. Owner: the benchmark
// goroutine.
type toolEnv struct {
	cnitool  string
	dir      string // netns paths (never created: the plugins here do not enter them)
	confDir  string
	env      []string // cnitool's environment, set once the networks are written
	floor    string   // the floor plugin's network
	networks []string // names, for the cleanup of libcni's cache
	ns       int
}

// newToolEnv builds the floor plugin (testdata/floor) and writes its
// network.
func newToolEnv(b *testing.B) *toolEnv {
	b.Helper()
	e := &toolEnv{
		cnitool: testenv.Tool(b, "cnitool"),
		dir:     b.TempDir(),
		confDir: b.TempDir(),
	}
	floorDir := b.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(floorDir, "cnibench-floor"), "./tests/cnibench/testdata/floor")
	build.Dir = testenv.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building the floor plugin: %v\n%s", err, out)
	}
	cniPath := []string{testenv.Binaries().Dir, floorDir, debianPlugins}
	e.env = append(os.Environ(), "NETCONFPATH="+e.confDir, "CNI_PATH="+strings.Join(cniPath, ":"),
		"CNI_IFNAME=eth0", "CNI_ARGS=", "CAP_ARGS=")
	b.Cleanup(e.cleanCache)
	e.floor = e.network(b, "floor", `{"type":"cnibench-floor"}`)
	return e
}

// network writes a conflist of one plugin and returns its name (unique
// per process, so that libcni's cache entries of this run are ours).
func (e *toolEnv) network(b *testing.B, name, plugin string) string {
	b.Helper()
	full := fmt.Sprintf("cnibench-%s-%d", name, os.Getpid())
	conf := fmt.Sprintf(`{"cniVersion":%q,"name":%q,"plugins":[%s]}`, cniVersion, full, plugin)
	if err := os.WriteFile(filepath.Join(e.confDir, full+".conflist"), []byte(conf), 0o600); err != nil {
		b.Fatal(err)
	}
	e.networks = append(e.networks, full)
	return full
}

// cleanCache removes the results cnitool's libcni cached for our
// networks in its default cache dir.
func (e *toolEnv) cleanCache() {
	for _, n := range e.networks {
		files, _ := filepath.Glob(filepath.Join("/var/lib/cni/results", n+"-*"))
		for _, f := range files {
			_ = os.Remove(f)
		}
	}
}

// leaseDir writes host-local lease files: one file per address, named by
// it, holding "<container ID>\r\n<ifname>", and last_reserved_ip.0.
// Owner: the benchmark goroutine.
type leaseDir struct {
	dir  string
	next netip.Addr
}

func (l *leaseDir) fill(b *testing.B, n int) {
	b.Helper()
	if err := os.MkdirAll(l.dir, 0o755); err != nil {
		b.Fatal(err)
	}
	var last netip.Addr
	for i := 0; i < n; i++ {
		last, l.next = l.next, l.next.Next()
		content := fmt.Sprintf("prefill-%s\r\neth0", last)
		if err := os.WriteFile(filepath.Join(l.dir, last.String()), []byte(content), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	if last.IsValid() {
		if err := os.WriteFile(filepath.Join(l.dir, "last_reserved_ip.0"), []byte(last.String()), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// remove deletes the lease files of ips (the ADDs of one round).
func (l *leaseDir) remove(b *testing.B, ips []netip.Addr) {
	b.Helper()
	for _, ip := range ips {
		if err := os.Remove(filepath.Join(l.dir, ip.String())); err != nil {
			b.Errorf("removing the lease of %s: %v", ip, err)
		}
	}
}

// reportLatency reports the p50 and p99 of lat in milliseconds.
func reportLatency(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	b.ReportMetric(ms(percentile(lat, 0.50)), "p50-ms")
	b.ReportMetric(ms(percentile(lat, 0.99)), "p99-ms")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// percentile is the nearest-rank p-quantile (0 < p <= 1) of sorted, 0
// when it is empty.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}
