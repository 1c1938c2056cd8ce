package ipam_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/plugins/ipam"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	"github.com/contiv-ipam/agent/plugins/ksr/model/mirror"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// The chaos test: a child process runs the whole stack (etcd client, bolt,
// contivconf, nodesync with its presence lease, ipam, controller) against
// the test's etcd and allocates and releases pod addresses, printing every
// acknowledged call. Meanwhile the test writes random values to the
// Kubernetes state in etcd (valid pods, garbage, oversized values), stops
// and restarts etcd, and kills the child with SIGKILL and starts it again.
// At the end a last child checks that the agent is ready, that the
// allocations are what the Kubernetes state and the acknowledged calls
// imply, and no child logged a panic or a fatal error.
//
// CHAOS_DURATION sets how long the chaos lasts (default 12s; `make chaos`
// runs it longer).

// Child process settings, by environment.
const (
	chaosChildEnv = "IPAM_CHAOS_CHILD" // run|check: the test binary is a chaos child
	chaosBoltEnv  = "IPAM_CHAOS_BOLT"
	chaosEtcdEnv  = "IPAM_CHAOS_ETCD"
	chaosSeedEnv  = "IPAM_CHAOS_SEED"
)

// chaosConfig: node 1 gets 10.1.1.0/24.
const chaosConfig = `
ipamConfig:
  podSubnetCIDR: 10.1.0.0/16
  podSubnetOneNodePrefixLen: 24
  nodeInterconnectCIDR: 192.168.16.0/24
`

// chaosGrace is the absent-pod grace period of the children.
const chaosGrace = time.Second

// chaosPods are the child's pods: they exist in Kubernetes (without an
// address) for the whole test, as pods do before their CNI ADD.
const chaosPods = 24

func chaosPod(n int) podmodel.ID { return podmodel.ID{Name: fmt.Sprintf("c%d", n), Namespace: "chaos"} }

// chaosChild runs a child: "run" allocates and releases forever, "check"
// prints the allocations as JSON once IPAM is ready and the grace period
// has passed.
func chaosChild(mode string) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	s, err := buildStack(stackOpts{endpoint: os.Getenv(chaosEtcdEnv), yaml: chaosConfig, boltPath: os.Getenv(chaosBoltEnv),
		etcdDown: true, presence: true, grace: chaosGrace}, log, nil)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for s.ipam.PodSubnetThisNode() == nil {
		if time.Now().After(deadline) {
			return fmt.Errorf("IPAM not initialised within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if mode == "check" {
		for !ipam.KubeStateIsLive(s.ipam) {
			if time.Now().After(deadline) {
				return fmt.Errorf("no DB resync from etcd within 30s")
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(3 * chaosGrace) // the watch caught up
		settle := time.Now().Add(30 * time.Second)
		for n, blocked := ipam.CandidateCount(s.ipam); (n > 0 || blocked != "") && time.Now().Before(settle); n, blocked = ipam.CandidateCount(s.ipam) {
			time.Sleep(50 * time.Millisecond) // absent pods released (slower under -race)
		}
		return json.NewEncoder(os.Stdout).Encode(ipam.AllocationsOf(s.ipam))
	}
	var seed uint64
	_, _ = fmt.Sscan(os.Getenv(chaosSeedEnv), &seed)
	return chaosCalls(s.ipam, rand.New(rand.NewPCG(seed, 7)))
}

// chaosCalls allocates and releases the child's pods, printing "B pod"
// before each call and "A pod ip", "R pod" or "E pod" (failed) after it.
func chaosCalls(i *ipam.Plugin, rng *rand.Rand) error {
	out := bufio.NewWriter(os.Stdout)
	for {
		id := chaosPod(rng.IntN(chaosPods))
		fmt.Fprintf(out, "B %s\n", id.Name)
		if err := out.Flush(); err != nil {
			return err
		}
		if rng.IntN(3) == 0 {
			if err := i.ReleasePodIP(id); err == nil {
				fmt.Fprintf(out, "R %s\n", id.Name)
			} else {
				fmt.Fprintf(out, "E %s\n", id.Name)
			}
		} else if ip, err := i.AllocatePodIP(id, "", ""); err == nil {
			fmt.Fprintf(out, "A %s %s\n", id.Name, ip)
		} else {
			fmt.Fprintf(out, "E %s\n", id.Name)
		}
		if err := out.Flush(); err != nil {
			return err
		}
		time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
	}
}

// chaosRun is the parent's view of the test.
type chaosRun struct {
	t    *testing.T
	srv  *etcdtest.Server
	cli  *clientv3.Client
	down bool // etcd is stopped
	bolt string
	logs string // directory of the children's stderr
	rng  *rand.Rand
	seed uint64

	mu         sync.Mutex
	acked      map[string]string   // pod -> address of its last acknowledged allocation ("" after a release)
	maybe      map[string]struct{} // pods whose last call was not acknowledged
	begun      string              // the pod of the call in flight ("" between calls)
	kube       map[string]string   // Kubernetes pods the test wrote: name -> address
	kubeUnsure map[string]struct{} // a write whose outcome etcd did not tell
	next       int                 // next Kubernetes pod name

	child    *exec.Cmd
	children int
	done     chan struct{} // closed when the child's stdout is read
}

func TestChaos(t *testing.T) {
	duration := 12 * time.Second
	if v := os.Getenv("CHAOS_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("CHAOS_DURATION %q: %v", v, err)
		}
		duration = d
	}
	seed := rand.Uint64()
	t.Logf("seed %d, duration %s", seed, duration)
	g := NewWithT(t)
	dir := t.TempDir()
	srv := etcdtest.Start(t)
	c := &chaosRun{t: t, srv: srv, cli: srv.Client(t), bolt: filepath.Join(dir, "bolt.db"), logs: dir, seed: seed,
		rng: rand.New(rand.NewPCG(seed, 1)), acked: map[string]string{}, maybe: map[string]struct{}{}, kube: map[string]string{},
		kubeUnsure: map[string]struct{}{}}
	for n := range chaosPods {
		c.putPod(chaosPod(n).Name, "")
	}
	stopBeats := c.heartbeat()
	defer stopBeats()
	c.startChild()
	for end := time.Now().Add(duration); time.Now().Before(end); {
		c.step()
	}
	c.killChild()
	if c.down {
		c.srv.Restart()
		c.down = false
	}
	allocs := c.check(g)
	c.verify(g, allocs)
	c.scanLogs(g)
	t.Logf("%d children, %d addresses held at the end, %d Kubernetes pods written", c.children, len(allocs.Pods), c.next)
}

// chaosBeat is the period of the test's contiv-ksr mirror marker.
const chaosBeat = 200 * time.Millisecond

// heartbeat writes contiv-ksr's mirror marker every chaosBeat, as its
// leader does (without it, nothing is released by absence), and now and
// then a value that is not a marker; it returns a function that stops it.
func (c *chaosRun) heartbeat() (stop func()) {
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		hb := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		for n := 0; ; n++ {
			hb = hb.Add(chaosBeat)
			c.mu.Lock()
			pods := len(c.kube) + chaosPods
			c.mu.Unlock()
			// a period of 1s (stale after 3s) though it beats every
			// chaosBeat: the children's event loops lag under -race
			value := mirror.Marker{Leader: "chaos", ResourceVersion: "1", Pods: pods, Heartbeat: hb, Interval: "1s"}.Encode()
			if n%10 == 9 {
				value = []byte(`{"heartbeat":"not a time"}`)
			}
			c.put(mirror.Key, value)
			select {
			case <-done:
				return
			case <-time.After(chaosBeat):
			}
		}
	}()
	return func() { close(done); <-stopped }
}

// step does one random thing to the system.
func (c *chaosRun) step() {
	switch n := c.rng.IntN(20); {
	case n == 0:
		c.killChild()
		c.startChild()
	case n == 1 && !c.down:
		c.srv.Stop()
		c.down = true
	case n <= 3 && c.down:
		c.srv.Restart()
		c.down = false
	case !c.down:
		c.writeKube()
	}
	time.Sleep(time.Duration(50+c.rng.IntN(100)) * time.Millisecond)
}

// writeKube writes a random value under the Kubernetes pod prefix: a new
// pod with an address of this node's subnet, a deletion, garbage, or an
// oversized value.
func (c *chaosRun) writeKube() {
	switch n := c.rng.IntN(10); {
	case n < 5:
		name := fmt.Sprintf("k%d", c.next)
		c.next++
		c.putPod(name, fmt.Sprintf("10.1.1.%d", 2+c.rng.IntN(252)))
	case n < 7:
		c.deleteSomeKubePod()
	case n < 9:
		c.put(podmodel.Key(fmt.Sprintf("junk%d", c.rng.IntN(5)), "chaos"), []byte("{not json"))
	default:
		big := strings.Repeat("x", 1<<20+c.rng.IntN(256<<10))
		c.put(podmodel.Key(fmt.Sprintf("big%d", c.rng.IntN(3)), "chaos"),
			[]byte(fmt.Sprintf(`{"name":"big","namespace":"chaos","labels":{"l":%q}}`, big)))
	}
}

func (c *chaosRun) putPod(name, ip string) {
	data, err := codec.Marshal(&podmodel.Pod{Name: name, Namespace: "chaos", IpAddress: ip})
	if err != nil {
		c.t.Fatal(err)
	}
	ok := c.put(podmodel.Key(name, "chaos"), data)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case !ok:
		c.kubeUnsure[name] = struct{}{}
	case ip != "":
		c.kube[name] = ip
	}
}

func (c *chaosRun) deleteSomeKubePod() {
	c.mu.Lock()
	var name string
	for k := range c.kube {
		name = k
		break
	}
	c.mu.Unlock()
	if name == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := c.cli.Delete(ctx, codec.KSRPrefix+podmodel.Key(name, "chaos"))
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.kube, name)
	if err != nil {
		c.kubeUnsure[name] = struct{}{}
	}
}

// put writes one key; false when etcd refused it (too large, down).
func (c *chaosRun) put(key string, value []byte) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := c.cli.Put(ctx, codec.KSRPrefix+key, string(value))
	return err == nil
}

// startChild starts a "run" child and reads its acknowledgements.
func (c *chaosRun) startChild() {
	c.children++
	cmd := c.childCmd("run")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.child, c.done = cmd, make(chan struct{})
	go c.readAcks(stdout, c.done)
}

func (c *chaosRun) childCmd(mode string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), chaosChildEnv+"="+mode, chaosBoltEnv+"="+c.bolt,
		chaosEtcdEnv+"="+c.srv.Endpoint(), fmt.Sprintf("%s=%d", chaosSeedEnv, c.seed+uint64(c.children)))
	logFile, err := os.Create(filepath.Join(c.logs, fmt.Sprintf("child-%d-%s.log", c.children, mode)))
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = logFile.Close() })
	cmd.Stderr = logFile
	return cmd
}

// readAcks records the child's acknowledged calls; the line being
// written when the child dies is incomplete and ignored.
func (c *chaosRun) readAcks(r io.Reader, done chan struct{}) {
	defer close(done)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		c.mu.Lock()
		switch {
		case len(f) == 2 && f[0] == "B":
			c.begun = f[1]
		case len(f) == 3 && f[0] == "A":
			c.acked[f[1]], c.begun = f[2], ""
			delete(c.maybe, f[1])
		case len(f) == 2 && f[0] == "R":
			c.acked[f[1]], c.begun = "", ""
			delete(c.maybe, f[1])
		case len(f) == 2 && f[0] == "E":
			c.maybe[f[1]], c.begun = struct{}{}, ""
		}
		c.mu.Unlock()
	}
}

// killChild kills the child with SIGKILL; the call it was in (if any)
// may or may not have taken effect.
func (c *chaosRun) killChild() {
	if c.child == nil {
		return
	}
	_ = c.child.Process.Kill()
	_ = c.child.Wait()
	<-c.done
	c.child = nil
	c.mu.Lock()
	if c.begun != "" {
		c.maybe[c.begun] = struct{}{}
		c.begun = ""
	}
	c.mu.Unlock()
}

// check runs a "check" child and returns the allocations it printed.
func (c *chaosRun) check(g Gomega) ipam.Allocations {
	cmd := c.childCmd("check")
	out, err := cmd.Output()
	g.Expect(err).NotTo(HaveOccurred(), "the last agent started and became ready")
	var allocs ipam.Allocations
	g.Expect(json.Unmarshal(out, &allocs)).To(Succeed())
	return allocs
}

// verify checks the allocations against what the test knows.
func (c *chaosRun) verify(g Gomega, allocs ipam.Allocations) {
	held := map[string]string{} // pod -> address
	byIP := map[string]string{}
	for _, a := range allocs.Pods {
		name := a.PodID.Name
		prev, dup := byIP[a.MainIP]
		g.Expect(dup).To(BeFalse(), "%s held by %s and %s", a.MainIP, prev, name)
		byIP[a.MainIP], held[name] = name, a.MainIP
		g.Expect(netip.MustParsePrefix("10.1.1.0/24").Contains(netip.MustParseAddr(a.MainIP))).To(BeTrue())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	childIP := map[string]bool{}
	for name, ip := range c.acked {
		if _, unsure := c.maybe[name]; unsure {
			if ip != "" {
				childIP[ip] = true
			}
			continue
		}
		if ip == "" {
			g.Expect(held).NotTo(HaveKey(name), "pod %s was released", name)
			continue
		}
		childIP[ip] = true
		g.Expect(held).To(HaveKeyWithValue(name, ip), "acknowledged allocation of %s", name)
	}
	for name, ip := range c.kube {
		if _, unsure := c.kubeUnsure[name]; unsure || childIP[ip] || held[name] == ip {
			continue
		}
		g.Expect(byIP).To(HaveKey(ip), "Kubernetes pod %s has %s: some pod must hold it", name, ip)
	}
	for name, ip := range held {
		_, isKube := c.kube[name]
		_, unsure := c.kubeUnsure[name]
		isChild := strings.HasPrefix(name, "c")
		g.Expect(isKube || unsure || isChild).To(BeTrue(), "%s holds %s but neither Kubernetes nor a call gave it", name, ip)
	}
}

// scanLogs fails on a panic or a fatal error in any child's log.
func (c *chaosRun) scanLogs(g Gomega) {
	files, err := filepath.Glob(filepath.Join(c.logs, "child-*.log"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files).NotTo(BeEmpty())
	for _, f := range files {
		data, err := os.ReadFile(f)
		g.Expect(err).NotTo(HaveOccurred())
		for _, line := range strings.Split(string(data), "\n") {
			lower := strings.ToLower(line)
			g.Expect(lower).NotTo(ContainSubstring("panic"), "%s: %s", filepath.Base(f), line)
			g.Expect(lower).NotTo(ContainSubstring("fatal"), "%s: %s", filepath.Base(f), line)
		}
	}
}
