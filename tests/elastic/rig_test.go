package elastic

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/contiv-ipam/agent/plugins/ipam"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	"github.com/contiv-ipam/agent/plugins/ksr/model/poolblock"
	"github.com/contiv-ipam/agent/plugins/podmanager"
	"github.com/contiv-ipam/agent/plugins/podmanager/cni"
	"github.com/contiv-ipam/agent/tests/cluster"
	"github.com/contiv-ipam/agent/tests/kubeenv"
	"github.com/contiv-ipam/agent/tests/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const (
	// node is the agent's node name.
	node = "node-a"
	// blockRange is poolBlocks.clusterCIDRs: 256 blocks of /28.
	blockRange = "10.200.0.0/20"
	// network is the CNI network of every Add.
	network = "elasticnet"
	// callTimeout bounds one gRPC call.
	callTimeout = 10 * time.Second
)

// Timings of ipam.conf.
const (
	warmTarget      = 4
	addressCooldown = time.Second
	blockCooldown   = 3 * time.Second
)

// ksrConf is ksr.conf with the pool block server on blockRange (/28
// blocks); tests/cluster's AddKSR writes no poolBlocks section.
const ksrConf = `resyncPeriod: 10s
nodeIDGracePeriod: 1m
electionTTL: 2s
poolBlocks:
  clusterCIDRs: ["` + blockRange + `"]
  blockSizeIPv4: 28
  blockSizeIPv6: 120
  maxBlocksPerNode: 8
`

// contivConf gives the node a /28 of 10.1.0.0/16 (12 addresses a pod can
// get).
const contivConf = `ipamConfig:
  podSubnetCIDR: 10.1.0.0/16
  podSubnetOneNodePrefixLen: 28
  vppHostSubnetCIDR: 172.30.0.0/16
  vppHostSubnetOneNodePrefixLen: 24
  nodeInterconnectCIDR: 192.168.16.0/24
  vxlanCIDR: 192.168.30.0/24
  serviceCIDR: 10.96.0.0/12
`

// ipamConf turns the elastic pools on; the pods of the tests exist only
// in their CNI calls, so the grace period of absent pods is beyond the
// test.
var ipamConf = fmt.Sprintf("absentPodGracePeriod: 1h\nstoreTimeout: 10s\ncniReservationTimeout: 0s\n"+
	"addressCooldown: %s\nwarmTarget: %d\nminimumFreeTarget: 0\nblockCooldown: %s\n",
	addressCooldown, warmTarget, blockCooldown)

// rig is one cluster: kube-apiserver, the Contiv etcd, contiv-ksr with
// poolBlocks (started here: see ksrProc) and one agent on node.
type rig struct {
	kube  *kubeenv.Env
	c     *cluster.Cluster
	cli   *clientv3.Client
	ksr   *ksrProc
	agent *cluster.Agent
	ksrs  int
}

// startRig starts the cluster with the Node of the agent in the API.
func startRig(t testing.TB) *rig {
	t.Helper()
	r := &rig{kube: kubeenv.StartT(t)}
	r.c = cluster.StartT(t, cluster.TestBins(t), r.kube.Kubeconfig)
	r.cli = r.c.ClientT(t)
	r.ksr = r.startKSR(t)
	if _, err := r.kube.Client.CoreV1().Nodes().Create(t.Context(),
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create node %s: %v", node, err)
	}
	r.agent = r.startAgent(t)
	return r
}

// startAgent starts (or restarts, on the same directory and bolt file)
// the agent of node.
func (r *rig) startAgent(t testing.TB) *cluster.Agent {
	t.Helper()
	return r.c.AddAgentT(t, cluster.AgentOptions{Node: node,
		Conf: map[string]string{"contiv.conf": contivConf, "ipam.conf": ipamConf}})
}

// ksrProc is a contiv-ksr process with a ksr.conf of this package, in
// its own process group, killed at cleanup.
type ksrProc struct {
	cmd  *exec.Cmd
	dir  string
	rest string
	done chan struct{}
}

// startKSR starts contiv-ksr (ksr-N) as tests/cluster does, with ksrConf,
// and waits until its /readiness answers 200.
func (r *rig) startKSR(t testing.TB) *ksrProc {
	t.Helper()
	r.ksrs++
	dir := filepath.Join(r.c.Dir, fmt.Sprintf("ksr-%d", r.ksrs))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"ksr.conf": ksrConf, "etcd.conf": fmt.Sprintf("endpoints: [%q]\n", r.c.Etcd.Endpoint),
		"http.conf": "endpoint: 127.0.0.1:0\n"}
	if err := testenv.WriteConfig(dir, files); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "ksr.log"))
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	k := &ksrProc{dir: dir, done: make(chan struct{}), cmd: exec.Command(r.c.Bins.KSR)}
	k.cmd.Dir = dir
	k.cmd.Env = append(os.Environ(), "CONFIG_DIR="+dir, "LOG_FORMAT=json", "KUBECONFIG="+r.kube.Kubeconfig,
		"HTTP_PORT=", "ETCD_ENDPOINTS=", "INITIAL_LOGLVL=")
	k.cmd.Stdout, k.cmd.Stderr = pw, pw
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := k.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		defer func() { _ = logf.Close() }()
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		sent := false
		for sc.Scan() {
			_, _ = logf.Write(append(sc.Bytes(), '\n'))
			var rec map[string]any
			if !sent && json.Unmarshal(sc.Bytes(), &rec) == nil && rec["msg"] == "contiv-ksr ready" {
				rest, _ := rec["rest"].(string)
				ready <- strings.TrimSuffix(rest, "/")
				sent = true
			}
		}
	}()
	go func() { _ = k.cmd.Wait(); _ = pw.Close(); close(k.done) }()
	t.Cleanup(k.kill)
	select {
	case k.rest = <-ready:
	case <-k.done:
		t.Fatalf("contiv-ksr exited before it was ready; log %s", filepath.Join(dir, "ksr.log"))
	case <-time.After(60 * time.Second):
		t.Fatalf("contiv-ksr not ready within 60 s; log %s", filepath.Join(dir, "ksr.log"))
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		var v any
		err := cluster.GetJSON(t.Context(), k.rest+"/readiness", &v)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return k
}

// kill sends SIGKILL to the process group and waits until it is reaped.
func (k *ksrProc) kill() {
	select {
	case <-k.done:
		return
	default:
	}
	_ = syscall.Kill(-k.cmd.Process.Pid, syscall.SIGKILL)
	<-k.done
}

// pools reads the agent's GET /contiv/v1/ipam/pools.
func pools(ctx context.Context, a *cluster.Agent) (ipam.NodeStats, error) {
	var s ipam.NodeStats
	err := cluster.GetJSON(ctx, a.REST+ipam.PoolsPath, &s)
	return s, err
}

// poolCIDRs are the pools' CIDRs, the first (the node's own) first.
func poolCIDRs(s ipam.NodeStats) []string {
	out := make([]string, 0, len(s.Pools))
	for _, p := range s.Pools {
		out = append(out, p.CIDR)
	}
	return out
}

// grants reads every grant in etcd: node -> blocks.
func grants(ctx context.Context, cli *clientv3.Client) (map[string][]netip.Prefix, error) {
	resp, err := cli.Get(ctx, codec.KSRPrefix+poolblock.GrantPrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	out := map[string][]netip.Prefix{}
	for _, kv := range resp.Kvs {
		g, err := poolblock.ParseGrant(kv.Value)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", kv.Key, err)
		}
		out[strings.TrimPrefix(string(kv.Key), codec.KSRPrefix+poolblock.GrantPrefix)] = g.Blocks
	}
	return out, nil
}

// grantOf is node's granted blocks as strings (for Eventually).
func grantOf(ctx context.Context, cli *clientv3.Client, n string) func() ([]string, error) {
	return func() ([]string, error) {
		all, err := grants(ctx, cli)
		var out []string
		for _, p := range all[n] {
			out = append(out, p.String())
		}
		return out, err
	}
}

// doubleGranted lists the blocks that are in two grants, or twice in one.
func doubleGranted(all map[string][]netip.Prefix) []string {
	owner := map[netip.Prefix]string{}
	var v []string
	for n, bs := range all {
		for _, b := range bs {
			for p, o := range owner {
				if p.Overlaps(b) {
					v = append(v, fmt.Sprintf("block %s of %s overlaps %s of %s", b, n, p, o))
				}
			}
			owner[b] = n
		}
	}
	slices.Sort(v)
	return v
}

// cniClient calls Add and Delete on the agent's CNI socket.
type cniClient struct {
	conn *grpc.ClientConn
	rc   cni.RemoteCNIClient
}

func dialCNI(t testing.TB, socket string) *cniClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial %s: %v", socket, err)
	}
	return &cniClient{conn: conn, rc: cni.NewRemoteCNIClient(conn)}
}

func (c *cniClient) close() { _ = c.conn.Close() }

// add adds container cid and returns its address. Like contiv-cni, it
// repeats an Add the agent answers with "try again later" (code 11: a
// block is on its way) for up to 2 s.
func (c *cniClient) add(cid string) (netip.Addr, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	var reply *cni.CNIReply
	var err error
	for end, backoff := time.Now().Add(2*time.Second), 20*time.Millisecond; ; backoff = min(2*backoff, 320*time.Millisecond) {
		reply, err = c.rc.Add(ctx, request(cid))
		if err != nil || reply.GetErrorCode() != cni.CodeTryAgainLater || time.Now().After(end) {
			break
		}
		time.Sleep(backoff)
	}
	if err != nil {
		return netip.Addr{}, fmt.Errorf("Add %s: %w", cid, err)
	}
	if reply.GetResult() != cni.CNIReply_OK {
		return netip.Addr{}, fmt.Errorf("Add %s: ERROR %d: %s", cid, reply.GetErrorCode(), reply.GetError())
	}
	ifs := reply.GetInterfaces()
	if len(ifs) != 1 || len(ifs[0].GetIpAddresses()) != 1 {
		return netip.Addr{}, fmt.Errorf("Add %s: interfaces %v: want one with one address", cid, ifs)
	}
	p, err := netip.ParsePrefix(ifs[0].GetIpAddresses()[0].GetAddress())
	return p.Addr(), err
}

// del deletes container cid.
func (c *cniClient) del(cid string) error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	reply, err := c.rc.Delete(ctx, request(cid))
	if err == nil && reply.GetResult() != cni.CNIReply_OK {
		err = fmt.Errorf("ERROR %d: %s", reply.GetErrorCode(), reply.GetError())
	}
	if err != nil {
		return fmt.Errorf("Delete %s: %w", cid, err)
	}
	return nil
}

func request(cid string) *cni.CNIRequest {
	return &cni.CNIRequest{
		Version:          "1.1.0",
		ContainerId:      cid,
		NetworkNamespace: "/var/run/netns/" + cid,
		InterfaceName:    "eth0",
		ExtraNwConfig:    fmt.Sprintf(`{"cniVersion":"1.1.0","name":%q,"type":"contiv-cni"}`, network),
		NetworkName:      network,
	}
}

// key is the attachment key of container cid.
func key(cid string) podmanager.AttachmentKey {
	return podmanager.AttachmentKey{Network: network, ContainerID: cid, IfName: "eth0"}
}

// addAll adds the containers cids from workers clients at once; it
// returns each one's address and the time its Add was answered, and the
// errors.
// Each client waits pace after each of its Adds, client w starting
// w*pace/workers late, so that the Adds are spread evenly.
func addAll(t testing.TB, socket string, cids []string, workers int, pace time.Duration) (map[string]netip.Addr, map[string]time.Time, []error) {
	t.Helper()
	var mu sync.Mutex
	addrs, at := map[string]netip.Addr{}, map[string]time.Time{}
	var errs []error
	next := make(chan string)
	var wg sync.WaitGroup
	for w := range workers {
		c := dialCNI(t, socket)
		wg.Go(func() {
			defer c.close()
			time.Sleep(time.Duration(w) * pace / time.Duration(workers))
			for cid := range next {
				a, err := c.add(cid)
				now := time.Now()
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					addrs[cid], at[cid] = a, now
				}
				mu.Unlock()
				time.Sleep(pace)
			}
		})
	}
	for _, cid := range cids {
		next <- cid
	}
	close(next)
	wg.Wait()
	return addrs, at, errs
}

// logRecord is one JSON line of a process log.
type logRecord struct {
	Time time.Time `json:"time"`
	Msg  string    `json:"msg"`
	Line string    `json:"-"`
}

// logged returns the records of the log file path whose message is one
// of msgs, in order.
func logged(t testing.TB, path string, msgs ...string) []logRecord {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []logRecord
	for _, line := range strings.Split(string(data), "\n") {
		var rec logRecord
		if json.Unmarshal([]byte(line), &rec) != nil || !slices.Contains(msgs, rec.Msg) {
			continue
		}
		rec.Line = line
		out = append(out, rec)
	}
	return out
}

// growthMsgs are the agent's log messages of one growth step.
var growthMsgs = []string{"free pod addresses below the warm target: asking for a pool", "pool claim written",
	"pod address pool added", "empty pod address pool given back"}

// logGrowth logs the agent's growth steps (on failure, and for the
// figures).
func logGrowth(t testing.TB, a *cluster.Agent) {
	t.Helper()
	for _, rec := range logged(t, a.Log, growthMsgs...) {
		t.Log(rec.Line)
	}
}
