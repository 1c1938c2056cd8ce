package sim

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
)

// memberStartTimeout bounds the wait for a started member to answer.
const memberStartTimeout = 60 * time.Second

// Etcd is a 3-member etcd cluster of child processes on 127.0.0.1, run
// from the etcd binary of _cache/kube/<version>/ (etcdtest.EtcdBinary:
// the one `make kube-bins` builds and tests/cluster runs). Its methods
// belong to the goroutine that started it; each Member's waiter
// goroutine only reaps its process.
type Etcd struct {
	Members []*Member
	bin     string
}

// Member is one etcd process. Its ports and data directory stay across
// Kill and Restart, so that it rejoins the cluster as itself.
type Member struct {
	Name                 string
	ClientPort, PeerPort int
	dir                  string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// StartEtcd runs members processes (3 for the simulation) with their
// data and logs under dir, and waits until every one answers. The
// processes inherit this process's RLIMIT_NOFILE (raise it first). Stop
// kills them; the kernel kills them too if this process dies.
func StartEtcd(ctx context.Context, dir string, members int) (*Etcd, error) {
	bin, err := etcdtest.EtcdBinary()
	if err != nil {
		return nil, err
	}
	e := &Etcd{bin: bin}
	var initial []string
	for i := 0; i < members; i++ {
		m := &Member{Name: fmt.Sprintf("sim%d", i), dir: filepath.Join(dir, fmt.Sprintf("etcd%d", i))}
		if m.ClientPort, err = freePort(); err == nil {
			m.PeerPort, err = freePort()
		}
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(m.dir, 0o700); err != nil {
			return nil, err
		}
		initial = append(initial, m.Name+"="+m.peerURL())
		e.Members = append(e.Members, m)
	}
	cluster := strings.Join(initial, ",")
	for _, m := range e.Members {
		if err := m.start(bin, cluster, "new"); err != nil {
			e.Stop()
			return nil, err
		}
	}
	for _, m := range e.Members {
		if err := m.waitReady(ctx); err != nil {
			e.Stop()
			return nil, err
		}
	}
	return e, nil
}

// Endpoints are the members' client addresses, "127.0.0.1:port".
func (e *Etcd) Endpoints() []string {
	out := make([]string, len(e.Members))
	for i, m := range e.Members {
		out[i] = m.Endpoint()
	}
	return out
}

// Client is a new client of every member; the caller closes it.
func (e *Etcd) Client() (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: e.Endpoints(), DialTimeout: 5 * time.Second,
		Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("etcd client of %v: %w", e.Endpoints(), err)
	}
	return cli, nil
}

// Stop kills every member (SIGKILL) and waits for each.
func (e *Etcd) Stop() {
	for _, m := range e.Members {
		m.Kill()
	}
}

// Restart starts a killed member again on its data and ports (it rejoins
// as an existing member) and waits until it answers.
func (e *Etcd) Restart(ctx context.Context, m *Member) error {
	var initial []string
	for _, o := range e.Members {
		initial = append(initial, o.Name+"="+o.peerURL())
	}
	if err := m.start(e.bin, strings.Join(initial, ","), "existing"); err != nil {
		return err
	}
	return m.waitReady(ctx)
}

// Endpoint is the member's client address.
func (m *Member) Endpoint() string { return "127.0.0.1:" + strconv.Itoa(m.ClientPort) }

func (m *Member) peerURL() string { return "http://127.0.0.1:" + strconv.Itoa(m.PeerPort) }

// PID is the running process's ID, 0 when it is not running.
func (m *Member) PID() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return 0
	}
	return m.cmd.Process.Pid
}

// start runs the member with its log appended to dir/etcd.log.
func (m *Member) start(bin, cluster, state string) error {
	logf, err := os.OpenFile(filepath.Join(m.dir, "etcd.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer func() { _ = logf.Close() }() // the child holds its own copy
	client := "http://" + m.Endpoint()
	cmd := exec.Command(bin, "--name", m.Name, "--data-dir", filepath.Join(m.dir, "data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", m.peerURL(), "--initial-advertise-peer-urls", m.peerURL(),
		"--initial-cluster", cluster, "--initial-cluster-state", state,
		"--initial-cluster-token", "contiv-sim", "--enable-grpc-gateway=false",
		// The simulation measures the agents, not the disk: the members
		// share one machine's disk with every node's bolt file.
		// --max-concurrent-streams keeps its default (math.MaxUint32 in
		// etcd 3.6): one stream per node's connection is far below it.
		"--unsafe-no-fsync", "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("etcd member %s: start %s: %w", m.Name, bin, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	m.mu.Lock()
	m.cmd, m.done = cmd, done
	m.mu.Unlock()
	return nil
}

// Kill sends SIGKILL and waits until the process is reaped; a member not
// running is left alone.
func (m *Member) Kill() {
	m.mu.Lock()
	cmd, done := m.cmd, m.done
	m.cmd = nil
	m.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// waitReady reads a key from the member alone until it answers, the
// process exits or memberStartTimeout passes.
func (m *Member) waitReady(ctx context.Context) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.Endpoint()}, DialTimeout: time.Second,
		Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	m.mu.Lock()
	done := m.done
	m.mu.Unlock()
	deadline := time.Now().Add(memberStartTimeout)
	for {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := cli.Get(rctx, "/")
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("etcd member %s exited while starting; see %s", m.Name, filepath.Join(m.dir, "etcd.log"))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("etcd member %s: no answer within %s: %w", m.Name, memberStartTimeout, err)
		}
	}
}

// MemberStats are what one member reports: from its /metrics (counters
// since the process started) and its /proc/<pid>/stat.
type MemberStats struct {
	Name string `json:"name"`
	// WatchEvents is etcd_debugging_mvcc_events_total: the watch events
	// the member sent.
	WatchEvents float64 `json:"watchEvents"`
	// SentBytes is etcd_network_client_grpc_sent_bytes_total: the bytes
	// sent to clients.
	SentBytes float64 `json:"sentBytes"`
	// Watchers is etcd_debugging_mvcc_watcher_total (a gauge).
	Watchers float64 `json:"watchers"`
	// CPU is user+system time from /proc/<pid>/stat.
	CPU time.Duration `json:"cpuNs"`
	// RSS is the resident set from /proc/<pid>/stat.
	RSS int64 `json:"rssBytes"`
}

// metricNames are the /metrics lines read into MemberStats.
var metricNames = []string{"etcd_debugging_mvcc_events_total", "etcd_network_client_grpc_sent_bytes_total",
	"etcd_debugging_mvcc_watcher_total"}

// Stats reads the member's metrics and process figures; a member not
// running gives an error.
func (m *Member) Stats(ctx context.Context) (MemberStats, error) {
	s := MemberStats{Name: m.Name}
	pid := m.PID()
	if pid == 0 {
		return s, fmt.Errorf("etcd member %s is not running", m.Name)
	}
	var err error
	if s.CPU, s.RSS, err = procStat(pid); err != nil {
		return s, err
	}
	vals, err := scrape(ctx, "http://"+m.Endpoint()+"/metrics", metricNames)
	if err != nil {
		return s, fmt.Errorf("etcd member %s: %w", m.Name, err)
	}
	s.WatchEvents, s.SentBytes, s.Watchers = vals[0], vals[1], vals[2]
	return s, nil
}

// scrape reads the unlabelled samples of names from a Prometheus text
// endpoint; a missing name is an error naming it.
func scrape(ctx context.Context, url string, names []string) ([]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	want := make(map[string]int, len(names))
	for i, n := range names {
		want[n] = i
	}
	out := make([]float64, len(names))
	seen := make([]bool, len(names))
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		i, found := want[name]
		if !ok || !found {
			continue
		}
		if out[i], err = strconv.ParseFloat(strings.TrimSpace(value), 64); err != nil {
			return nil, fmt.Errorf("%s: %q: %w", url, sc.Text(), err)
		}
		seen[i] = true
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	var errs []error
	for i, ok := range seen {
		if !ok {
			errs = append(errs, fmt.Errorf("%s: no sample of %s", url, names[i]))
		}
	}
	return out, errors.Join(errs...)
}

// procStat returns a process's CPU time (utime+stime) and RSS from
// /proc/<pid>/stat.
func procStat(pid int) (time.Duration, int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// the fields that follow start after the last ')'.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %q: no ')'", pid, s)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state): utime is field 14, stime 15, rss 24.
	if len(f) < 22 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %d fields after the name", pid, len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	rss, err3 := strconv.ParseInt(f[21], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	// Clock ticks are 100 per second on Linux (USER_HZ).
	const tick = 10 * time.Millisecond
	return time.Duration(utime+stime) * tick, rss * int64(os.Getpagesize()), nil
}

// freePort returns a loopback port nothing listens on right now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}
