//go:build node

package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// The IPAMs of BenchmarkPodStartup, under the same ptp: contiv-cni on the
// agent's socket, and Debian's host-local on the agent's pod subnet.
const (
	benchContiv    = "contiv-cni"
	benchHostLocal = "host-local"
)

// hostLocalWrapper is the IPAM type of the host-local node: hostLocalScript.
const hostLocalWrapper = "host-local-cni11"

// hostLocalScript wraps Debian's host-local (@HOST_LOCAL@), a CNI 1.0.0
// plugin, for the node's 1.1.0 conflist: host-local refuses a 1.1.0
// config, and fails STATUS, which containerd sends to a 1.1.0 conflist
// and ptp passes to its IPAM (the Node would stay NotReady). The wrapper
// answers STATUS itself and hands host-local the config as 1.0.0 (whose
// result is 1.1.0's), with shell builtins only: one sh more per call
// (about 1.3 ms on this machine).
const hostLocalScript = `#!/bin/sh
[ "$CNI_COMMAND" = STATUS ] && exit 0
IFS= read -r conf
v='"cniVersion":"1.1.0"'
case "$conf" in *"$v"*) conf="${conf%%"$v"*}\"cniVersion\":\"1.0.0\"${conf#*"$v"}";; esac
exec '@HOST_LOCAL@' <<EOF
$conf
EOF
`

// Sizes and bounds of BenchmarkPodStartup.
const (
	// benchWarmUpPods run once on a fresh node before any timed burst.
	benchWarmUpPods = 10
	// benchLabel labels a burst's pods with its round ("r3").
	benchLabel = "bench"
	// benchRunningTimeout bounds a burst: every pod Running.
	benchRunningTimeout = 6 * time.Minute
	// benchQuiet is how long the machine's busy share is read before a
	// burst, with the nodes idle: what else runs on it. A burst waits,
	// up to benchQuietWait, for such a window under benchQuietBusy.
	benchQuiet     = 5 * time.Second
	benchQuietBusy = 25.0 // %
	benchQuietWait = time.Minute
	// benchCleanTimeout bounds each wait of the cleanup after a burst.
	benchCleanTimeout = 3 * time.Minute
	// podDurationMetric is the agent's histogram of CNI calls.
	podDurationMetric = "contiv_podmanager_request_duration_seconds"
)

// benchSizes are the bursts: 110 is kubelet's maxPods (the node then
// holds nothing else: the harness runs no pod of its own).
var benchSizes = []int{30, 110}

// BenchmarkPodStartup: N pods (30, then 110) created at once on a real
// node (tests/node: kube-apiserver, kube-scheduler, kube-controller-
// manager, containerd, runc, kubelet, ptp), with contiv-cni as ptp's
// IPAM on the agent's socket, and with Debian's host-local on the agent's
// pod subnet (hostLocalScript). Both nodes run from the start, each after
// one untimed warm-up burst of benchWarmUpPods, so that the two IPAMs'
// runs of a size follow each other (on a shared machine the load drifts):
// pods=30 on contiv-cni's node -count times, then on host-local's, then
// pods=110 the same way; the idle node's own work runs under every burst.
//
// One op is one burst: the N pods are created by N goroutines at once
// (bare pods: no ReplicaSet in the way; the client's rate limit is
// 1,000/s), and a watch, opened before, notes when each pod is first seen
// scheduled (spec.nodeName) and Running (phase Running with its podIP). A
// pod's latency runs from the start of its own create call to the watch
// event that shows it Running: the API server's timestamps
// (creationTimestamp, a condition's lastTransitionTime) have a resolution
// of one second, too coarse here. The timer runs from the first create to
// the last Running. Reported: p50, p99 (nearest rank: at 30 pods the p99
// is the max) and max of that latency; the p50 of create → scheduled and
// of each of podPhases (from containerd's log); the CPU time of each of
// cpuGroups (utime+stime, 10 ms resolution) and of the whole machine over
// the burst, its busy share then and over benchQuiet before (the nodes
// idle: what else runs on the machine); the agent's peak RSS
// over the burst (VmHWM reset at its start); and from the agent's
// /metrics its time for the burst's CNI Add and Confirm calls (the
// histogram contiv_podmanager_request_duration_seconds before and after:
// p50 and p99 interpolated within its buckets, the mean exact). Then,
// untimed, the pods are deleted and the node waited clean (waitClean): no
// pod, no sandbox, no allocation at the agent (contiv-cni) or lease file
// (host-local).
func BenchmarkPodStartup(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("n/a: a real node needs root (network namespaces, cgroups, containerd, kubelet)")
	}
	ctrllog.SetLogger(logr.Discard()) // envtest's; it warns once otherwise
	ipams := []string{benchContiv, benchHostLocal}
	nodes := map[string]*benchNode{}
	for _, ipamName := range ipams {
		nodes[ipamName] = startBenchNode(b, ipamName)
	}
	for _, pods := range benchSizes {
		b.Run(fmt.Sprintf("pods=%d", pods), func(b *testing.B) {
			for _, ipamName := range ipams {
				b.Run("ipam="+ipamName, func(b *testing.B) { nodes[ipamName].measure(b, pods) })
			}
		})
	}
}

// benchNode is a node of BenchmarkPodStartup and its rounds.
type benchNode struct {
	n *Node
	// client is a clientset speaking protobuf to the API server (cheaper
	// to decode than JSON for the watch), at the harness's rate limit.
	client kubernetes.Interface
	ipam   string
	// kubePids are kube-apiserver, its etcd, kube-scheduler and
	// kube-controller-manager.
	kubePids []int
	// leases is host-local's lease directory (its dataDir/<network>).
	leases string
	round  int
}

// startBenchNode starts a node with ipamName as ptp's IPAM and runs the
// warm-up burst on it.
func startBenchNode(b *testing.B, ipamName string) *benchNode {
	bn := &benchNode{ipam: ipamName}
	var opts Options
	var ipamErr error
	if ipamName == benchHostLocal {
		opts.IPAM = func(n *Node) map[string]any {
			conf, err := hostLocalIPAM(n)
			ipamErr = err
			return conf
		}
	}
	bn.n = StartT(b, opts)
	if ipamErr != nil {
		b.Fatal(ipamErr)
	}
	cfg := rest.CopyConfig(bn.n.Kube.Config)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	var err error
	if bn.client, err = kubernetes.NewForConfig(cfg); err != nil {
		b.Fatal(err)
	}
	if bn.kubePids, err = findKubePids(bn.n); err != nil {
		b.Fatal(err)
	}
	if ipamName == benchHostLocal {
		bn.leases = filepath.Join(bn.n.Dir, "host-local", bn.n.Network)
	}
	r, err := bn.burst(b.Context(), benchWarmUpPods, nil)
	if err != nil {
		b.Fatalf("warm-up: %v", err)
	}
	b.Logf("node %s (%s): warm-up: %d pods, p50 %s, max %s; cleaned in %s", bn.n.ID, ipamName, benchWarmUpPods, ms(r.p(0.5)), ms(r.p(1)), r.clean.Round(time.Millisecond))
	return bn
}

// hostLocalIPAM is ptp's ipam section for host-local: the agent's pod
// subnet and gateway (the addresses contiv-cni would give), a default
// route, leases under the node's directory.
func hostLocalIPAM(n *Node) (map[string]any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := n.Agent.IPAM(ctx)
	if err != nil {
		return nil, err
	}
	subnet, err := netip.ParsePrefix(info.PodSubnetThisNode)
	if err != nil {
		return nil, fmt.Errorf("podSubnetThisNode %q: %w", info.PodSubnetThisNode, err)
	}
	wrapper := strings.ReplaceAll(hostLocalScript, "@HOST_LOCAL@", filepath.Join(n.CNIBinDir, "host-local"))
	if err := os.WriteFile(filepath.Join(n.CNIBinDir, hostLocalWrapper), []byte(wrapper), 0o755); err != nil {
		return nil, err
	}
	return map[string]any{
		"type":    hostLocalWrapper,
		"ranges":  []any{[]any{map[string]any{"subnet": subnet.Masked().String(), "gateway": subnet.Masked().Addr().Next().String()}}},
		"routes":  []any{map[string]any{"dst": "0.0.0.0/0"}},
		"dataDir": filepath.Join(n.Dir, "host-local"),
	}, nil
}

// measure runs b.N bursts of pods and reports their figures.
func (bn *benchNode) measure(b *testing.B, pods int) {
	b.StopTimer()
	var all burstResult
	for range b.N {
		r, err := bn.burst(b.Context(), pods, b)
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("%d pods: p50 %s, p99 %s, max %s (scheduled p50 %s; steps p50: %s); agent peak RSS %.1f MiB; CPU %s; "+
			"machine %.0f%% busy (%.0f%% in the %s before, after waiting %s for it); %d failed CRI calls; %d Adds at the agent; watch restarted %d times; cleaned in %s", pods, ms(r.p(0.5)), ms(r.p(0.99)), ms(r.p(1)),
			ms(Percentile(r.scheduled, 0.5)), r.phaseText(), float64(r.agentRSS)/(1<<20), r.cpuText(), r.busy, r.background, benchQuiet, r.waited.Round(time.Second), r.failures,
			int(r.hist["add"].Count), r.rewatches, r.clean.Round(time.Millisecond))
		all.merge(r)
	}
	slices.Sort(all.latencies)
	slices.Sort(all.scheduled)
	for _, ph := range podPhases {
		slices.Sort(all.phases[ph.name])
		b.ReportMetric(msf(Percentile(all.phases[ph.name], 0.5)), ph.name+"-p50-ms")
	}
	b.ReportMetric(msf(Percentile(all.phases["sandbox"], 0.99)), "sandbox-p99-ms")
	b.ReportMetric(msf(all.p(0.5)), "p50-ms")
	b.ReportMetric(msf(all.p(0.99)), "p99-ms")
	b.ReportMetric(msf(all.p(1)), "max-ms")
	b.ReportMetric(msf(Percentile(all.scheduled, 0.5)), "sched-p50-ms")
	runs := float64(b.N)
	for _, g := range cpuGroups {
		b.ReportMetric(msf(all.cpu[g.name])/runs, g.name+"-cpu-ms")
	}
	b.ReportMetric(msf(all.machineCPU)/runs, "machine-cpu-ms")
	other := all.machineCPU
	for _, g := range cpuGroups {
		other -= all.cpu[g.name]
	}
	b.ReportMetric(msf(other)/runs, "other-cpu-ms")
	b.ReportMetric(float64(all.agentRSS)/(1<<20), "agent-rss-MiB")
	b.ReportMetric(all.busy/runs, "busy-pct")
	b.ReportMetric(all.background/runs, "before-busy-pct")
	b.ReportMetric(float64(all.failures)/runs, "cri-failures")
	if bn.ipam != benchContiv {
		return
	}
	for _, m := range []string{"add", "confirm"} {
		h := all.hist[m]
		if v, ok := h.Quantile(0.5); ok {
			b.ReportMetric(v*1e3, m+"-p50-ms")
		}
		if v, ok := h.Quantile(0.99); ok {
			b.ReportMetric(v*1e3, m+"-p99-ms")
		}
		if v, ok := h.Mean(); ok {
			b.ReportMetric(v*1e3, m+"-mean-ms")
		}
	}
	b.ReportMetric(all.hist["add"].Count/float64(len(all.latencies)), "adds-per-pod")
}

// burstResult is what one burst (or several, merged) measured.
type burstResult struct {
	// latencies are each pod's create call → Running seen, sorted.
	latencies []time.Duration
	// scheduled are each pod's create call → nodeName seen, sorted.
	scheduled []time.Duration
	// phases are each pod's steps by name (podPhases), sorted.
	phases map[string][]time.Duration

	// cpu is the CPU time of each of cpuGroups; machineCPU the whole
	// machine's (every core's busy time).
	cpu        map[string]time.Duration
	machineCPU time.Duration
	// agentRSS is the agent's peak RSS in bytes.
	agentRSS uint64
	// busy is the machine's busy share in %; background the same over
	// benchQuiet before the burst (the idle nodes, anything else), after
	// waiting that long for it to be under benchQuietBusy.
	busy, background float64
	waited           time.Duration
	// failures counts the CRI calls of the burst that failed (kubelet
	// tries them again).
	failures int
	// hist are the agent's CNI calls by method.
	hist map[string]Histogram
	// clean is how long the cleanup after the burst took.
	clean time.Duration
	// rewatches counts the watch's restarts (the API server ends a watch
	// that falls behind).
	rewatches int64
}

// p is the q-quantile of the latencies (nearest rank).
func (r burstResult) p(q float64) time.Duration { return Percentile(r.latencies, q) }

// merge adds o to r: latencies pooled, CPU and busy and load summed (the
// caller divides by the runs), the largest RSS, histograms summed.
func (r *burstResult) merge(o burstResult) {
	r.latencies = append(r.latencies, o.latencies...)
	r.scheduled = append(r.scheduled, o.scheduled...)
	if r.phases == nil {
		r.phases = map[string][]time.Duration{}
	}
	for k, v := range o.phases {
		r.phases[k] = append(r.phases[k], v...)
	}
	if r.cpu == nil {
		r.cpu = map[string]time.Duration{}
	}
	for g, d := range o.cpu {
		r.cpu[g] += d
	}
	r.machineCPU += o.machineCPU
	r.agentRSS = max(r.agentRSS, o.agentRSS)
	r.busy += o.busy
	r.background += o.background
	r.waited += o.waited
	r.failures += o.failures
	r.rewatches += o.rewatches
	if r.hist == nil {
		r.hist = map[string]Histogram{}
	}
	for m, h := range o.hist {
		prev, ok := r.hist[m]
		if !ok {
			r.hist[m] = h
			continue
		}
		sum := Histogram{Bounds: slices.Clone(h.Bounds), Counts: slices.Clone(h.Counts), Count: h.Count + prev.Count, Sum: h.Sum + prev.Sum}
		for i, bound := range prev.Bounds {
			if j := slices.Index(sum.Bounds, bound); j >= 0 {
				sum.Counts[j] += prev.Counts[i]
			}
		}
		r.hist[m] = sum
	}
}

// podPhases are the steps of a pod's start that a burst reports, from
// containerd's log (ParseCRILog) and the watch.
var podPhases = []struct{ name, what string }{
	{"to-sandbox", "create call → containerd's RunPodSandbox begins (API server, scheduler, kubelet's pod worker)"},
	{"sandbox", "RunPodSandbox (the pause container, its network namespace, the CNI ADD: ptp and its IPAM)"},
	{"container", "RunPodSandbox returned → StartContainer returned (create and start the busybox container)"},
	{"status", "StartContainer returned → the watch shows the pod Running (kubelet's PLEG, its status update)"},
}

// phases reads containerd's log from offset (the burst's start) and
// returns each pod's steps, sorted, and how many CRI calls failed; a pod
// whose steps the log lacks fails the burst.
func (bn *benchNode) phases(offset int64, pods []*corev1.Pod, starts, running []time.Time) (map[string][]time.Duration, int, error) {
	f, err := os.Open(bn.n.Containerd.Log())
	if err != nil {
		return nil, 0, err
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, 0, err
	}
	timelines, failures, err := ParseCRILog(f)
	if err != nil {
		return nil, 0, err
	}
	out := map[string][]time.Duration{}
	for i, p := range pods {
		tl := timelines[p.Name]
		if tl == nil || tl.SandboxAsked.IsZero() || tl.SandboxReady.IsZero() || tl.ContainerStarted.IsZero() {
			return nil, 0, fmt.Errorf("containerd's log lacks the start of pod %s: %+v", p.Name, tl)
		}
		out["to-sandbox"] = append(out["to-sandbox"], tl.SandboxAsked.Sub(starts[i]))
		out["sandbox"] = append(out["sandbox"], tl.SandboxReady.Sub(tl.SandboxAsked))
		out["container"] = append(out["container"], tl.ContainerStarted.Sub(tl.SandboxReady))
		out["status"] = append(out["status"], running[i].Sub(tl.ContainerStarted))
	}
	for _, v := range out {
		slices.Sort(v)
	}
	return out, failures, nil
}

// cpuGroups are the processes whose CPU time a burst reports, by name:
// what a pod start costs, and where.
var cpuGroups = []struct {
	name string
	what string
	// times picks what counts of a process of the group.
	times func(ProcTimes) time.Duration
}{
	{"agent", "contiv-agent", ProcTimes.Total},
	{"kubelet", "kubelet", ProcTimes.Total},
	{"containerd", "containerd itself", func(t ProcTimes) time.Duration { return t.Self }},
	{"exec", "the processes containerd ran and reaped: CNI plugins (ptp and its IPAM), shim starts", func(t ProcTimes) time.Duration { return t.Children }},
	{"shims", "containerd-shim-runc-v2 of the pods, with the runc runs they reaped", ProcTimes.Total},
	{"kube", "kube-apiserver, its etcd, kube-scheduler, kube-controller-manager", ProcTimes.Total},
	{"contiv", "the Contiv etcd and contiv-ksr", ProcTimes.Total},
	{"pods", "the pods' processes (pause; busybox sh and the sleep it runs every second)", ProcTimes.Total},
	{"bench", "this benchmark: the creates, the watch", ProcTimes.Total},
}

// groupPids are the processes of each of cpuGroups now.
func (bn *benchNode) groupPids() (map[string][]int, error) {
	n := bn.n
	shims, err := Pids(func(cmd []string) bool {
		return filepath.Base(cmd[0]) == "containerd-shim-runc-v2" && slices.ContainsFunc(cmd, func(a string) bool { return strings.Contains(a, n.RunDir) })
	})
	if err != nil {
		return nil, err
	}
	pods, err := CgroupPids(n.CgroupRoot)
	if err != nil {
		return nil, err
	}
	var contiv []int
	for _, p := range n.Contiv.Procs() {
		if p.PID() != n.Agent.PID() {
			contiv = append(contiv, p.PID())
		}
	}
	c := n.Containerd.PID()
	return map[string][]int{"agent": {n.Agent.PID()}, "kubelet": {n.Kubelet.PID()}, "containerd": {c}, "exec": {c},
		"shims": shims, "kube": bn.kubePids, "contiv": contiv, "pods": pods, "bench": {os.Getpid()}}, nil
}

// cpuSample is the times of the processes of each group at one moment.
type cpuSample map[string]map[int]ProcTimes

func (bn *benchNode) sampleCPU() (cpuSample, error) {
	pids, err := bn.groupPids()
	if err != nil {
		return nil, err
	}
	s := cpuSample{}
	for g, list := range pids {
		s[g] = map[int]ProcTimes{}
		for _, pid := range list {
			t, err := ReadProcTimes(pid)
			if errors.Is(err, os.ErrNotExist) {
				continue // ended since the list (a pod's sleep)
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", g, err)
			}
			s[g][pid] = t
		}
	}
	return s, nil
}

// cpuBetween is each group's CPU time from s0 to s1: a process of s1
// that s0 lacks started since (all its time counts); one that ended
// meanwhile is lost.
func cpuBetween(s0, s1 cpuSample) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, g := range cpuGroups {
		for pid, t := range s1[g.name] {
			out[g.name] += g.times(t) - g.times(s0[g.name][pid])
		}
	}
	return out
}

// phaseText is the p50 of each step for the log.
func (r burstResult) phaseText() string {
	var parts []string
	for _, ph := range podPhases {
		parts = append(parts, fmt.Sprintf("%s %s", ph.name, ms(Percentile(r.phases[ph.name], 0.5))))
	}
	return strings.Join(parts, ", ")
}

// cpuText is the CPU times for the log.
func (r burstResult) cpuText() string {
	var parts []string
	for _, g := range cpuGroups {
		parts = append(parts, fmt.Sprintf("%s %s", g.name, r.cpu[g.name]))
	}
	return strings.Join(parts, ", ") + fmt.Sprintf("; machine %s", r.machineCPU)
}

// findKubePids finds kube-apiserver (by its port), its etcd (by the
// address the API server names) and the harness's scheduler and
// controller-manager.
func findKubePids(n *Node) ([]int, error) {
	u, err := url.Parse(n.Kube.Config.Host)
	if err != nil {
		return nil, err
	}
	var etcdServers string
	apiservers, err := Pids(func(cmd []string) bool {
		if filepath.Base(cmd[0]) != "kube-apiserver" || !slices.Contains(cmd, "--secure-port="+u.Port()) {
			return false
		}
		for _, a := range cmd {
			if v, ok := strings.CutPrefix(a, "--etcd-servers="); ok {
				etcdServers = v
			}
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	if len(apiservers) != 1 || etcdServers == "" {
		return nil, fmt.Errorf("kube-apiserver --secure-port=%s: %d processes, --etcd-servers %q", u.Port(), len(apiservers), etcdServers)
	}
	etcds, err := Pids(func(cmd []string) bool {
		return filepath.Base(cmd[0]) == "etcd" && slices.Contains(cmd, "--listen-client-urls="+etcdServers)
	})
	if err != nil {
		return nil, err
	}
	if len(etcds) != 1 {
		return nil, fmt.Errorf("etcd --listen-client-urls=%s: %d processes", etcdServers, len(etcds))
	}
	out := append(apiservers, etcds...)
	for _, p := range n.control.procs() {
		out = append(out, p.PID())
	}
	return out, nil
}

// burst creates pods pods at once, waits until every one is Running,
// measures, then deletes them and waits until the node is clean. With b
// set, its timer runs from the first create to the last Running.
func (bn *benchNode) burst(ctx context.Context, pods int, b *testing.B) (burstResult, error) {
	var r burstResult
	n := bn.n
	if err := bn.waitClean(ctx); err != nil {
		return r, fmt.Errorf("before the burst: %w", err)
	}
	bn.round++
	round := fmt.Sprintf("r%d", bn.round)
	selector := benchLabel + "=" + round
	client := bn.client.CoreV1().Pods(ns)
	pw, err := watchPods(ctx, client, selector)
	if err != nil {
		return r, err
	}
	defer pw.stop()
	histBefore, err := n.AgentHistograms(ctx, podDurationMetric, "method")
	if err != nil {
		return r, err
	}
	podList := make([]*corev1.Pod, pods)
	index := map[string]int{}
	for i := range podList {
		name := fmt.Sprintf("bench-%s-%03d", round, i)
		p := BusyboxPod(ns, name)
		p.Labels[benchLabel] = round
		podList[i] = p
		index[name] = i
	}
	if r.background, r.waited, err = waitQuiet(ctx); err != nil {
		return r, err
	}
	agentPID := n.Agent.PID()
	if err := ResetPeakRSS(agentPID); err != nil {
		return r, fmt.Errorf("reset the agent's VmHWM: %w", err)
	}
	cpu0, err := bn.sampleCPU()
	if err != nil {
		return r, err
	}
	machine0, err := ReadMachineCPU()
	if err != nil {
		return r, err
	}
	logAt, err := os.Stat(n.Containerd.Log())
	if err != nil {
		return r, err
	}

	if b != nil {
		b.StartTimer()
	}
	starts := make([]time.Time, pods)
	createErrs := make([]error, pods)
	var wg sync.WaitGroup
	for i, p := range podList {
		wg.Go(func() {
			starts[i] = time.Now()
			_, createErrs[i] = client.Create(ctx, p, metav1.CreateOptions{})
		})
	}
	created := make(chan struct{})
	go func() { wg.Wait(); close(created) }()
	scheduledAt := make([]time.Time, pods)
	runningAt := make([]time.Time, pods)
	running := 0
	timeout := time.NewTimer(benchRunningTimeout)
	defer timeout.Stop()
	for running < pods {
		select {
		case <-created:
			if err := errors.Join(createErrs...); err != nil {
				return r, err
			}
			created = nil
		case ev := <-pw.events:
			i, known := index[ev.pod.Name]
			if !known {
				continue
			}
			if scheduledAt[i].IsZero() && ev.pod.Spec.NodeName != "" {
				scheduledAt[i] = ev.at
			}
			if runningAt[i].IsZero() && Running(*ev.pod) {
				runningAt[i] = ev.at
				running++
			}
		case err := <-pw.errc:
			wg.Wait()
			return r, fmt.Errorf("%d of %d pods Running: %w", running, pods, err)
		case <-timeout.C:
			wg.Wait()
			return r, fmt.Errorf("%d of %d pods Running after %s; %s", running, pods, benchRunningTimeout, tailFile(n.Kubelet.Log(), 10))
		case <-ctx.Done():
			wg.Wait()
			return r, ctx.Err()
		}
	}
	if b != nil {
		b.StopTimer()
	}
	cpu1, errCPU := bn.sampleCPU()
	rss, errRSS := PeakRSS(agentPID)
	machine1, errMachine := ReadMachineCPU()
	wg.Wait()
	if err := errors.Join(append(createErrs, errCPU, errRSS, errMachine)...); err != nil {
		return r, err
	}
	for i := range pods {
		r.latencies = append(r.latencies, runningAt[i].Sub(starts[i]))
		if !scheduledAt[i].IsZero() {
			r.scheduled = append(r.scheduled, scheduledAt[i].Sub(starts[i]))
		}
	}
	slices.Sort(r.latencies)
	slices.Sort(r.scheduled)
	if r.phases, r.failures, err = bn.phases(logAt.Size(), podList, starts, runningAt); err != nil {
		return r, err
	}
	r.rewatches = pw.rewatches.Load()
	r.cpu = cpuBetween(cpu0, cpu1)
	r.machineCPU = time.Duration(machine1.Busy-machine0.Busy) * time.Second / userHZ
	r.agentRSS = rss
	r.busy = machine0.BusyPercent(machine1)

	histAfter, err := n.AgentHistograms(ctx, podDurationMetric, "method")
	if err != nil {
		return r, err
	}
	r.hist = map[string]Histogram{}
	for m, h := range histAfter {
		r.hist[m] = h.Sub(histBefore[m])
	}
	if err := bn.checkHeld(ctx, pods); err != nil {
		return r, err
	}

	t0 := time.Now()
	if err := client.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: selector}); err != nil {
		return r, fmt.Errorf("delete the pods of %s: %w", round, err)
	}
	if err := bn.waitClean(ctx); err != nil {
		return r, fmt.Errorf("after the burst: %w", err)
	}
	r.clean = time.Since(t0)
	return r, nil
}

// podEvent is a pod as a watch event showed it, and when it came.
type podEvent struct {
	pod *corev1.Pod
	at  time.Time
}

// podWatch follows the pods of a selector from before their creation:
// its goroutine only reads the watch and queues each event with the time
// it came (a large buffer: the API server ends a watch that falls
// behind), and when the watch ends it watches again from the last
// resourceVersion seen, or lists again if that is too old (the listed
// pods then count as seen at the time of the list).
type podWatch struct {
	events    chan podEvent
	errc      chan error
	rewatches atomic.Int64
	cancel    context.CancelFunc
	done      chan struct{}
}

// watchPods starts a podWatch of the pods of selector.
func watchPods(ctx context.Context, client typedcorev1.PodInterface, selector string) (*podWatch, error) {
	list, err := client.List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	if len(list.Items) > 0 {
		return nil, fmt.Errorf("pods %s exist before their creation", selector)
	}
	ctx, cancel := context.WithCancel(ctx)
	pw := &podWatch{events: make(chan podEvent, 1<<14), errc: make(chan error, 1), cancel: cancel, done: make(chan struct{})}
	go pw.run(ctx, client, selector, list.ResourceVersion)
	return pw, nil
}

// stop ends the watch and waits for its goroutine.
func (pw *podWatch) stop() {
	pw.cancel()
	<-pw.done
}

func (pw *podWatch) run(ctx context.Context, client typedcorev1.PodInterface, selector, rv string) {
	defer close(pw.done)
	fail := func(err error) {
		if ctx.Err() == nil {
			pw.errc <- err
		}
	}
	for ctx.Err() == nil {
		w, err := client.Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: rv, AllowWatchBookmarks: true})
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			if rv, err = pw.relist(ctx, client, selector); err != nil {
				fail(err)
				return
			}
			continue
		}
		if err != nil {
			fail(err)
			return
		}
		last, err := pw.drain(ctx, w)
		w.Stop()
		if last != "" {
			rv = last
		}
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			if rv, err = pw.relist(ctx, client, selector); err != nil {
				fail(err)
				return
			}
		} else if err != nil {
			fail(err)
			return
		}
		pw.rewatches.Add(1)
	}
}

// drain queues the events of w until it ends, and returns the last
// resourceVersion seen (or the error event's error).
func (pw *podWatch) drain(ctx context.Context, w watch.Interface) (string, error) {
	rv := ""
	for ev := range w.ResultChan() {
		at := time.Now()
		if ev.Type == watch.Error {
			return rv, apierrors.FromObject(ev.Object)
		}
		p, ok := ev.Object.(*corev1.Pod)
		if !ok {
			continue
		}
		rv = p.ResourceVersion
		if ev.Type != watch.Bookmark {
			pw.send(ctx, podEvent{pod: p, at: at})
		}
	}
	return rv, nil
}

// send queues an event unless the watch is stopped.
func (pw *podWatch) send(ctx context.Context, ev podEvent) {
	select {
	case pw.events <- ev:
	case <-ctx.Done():
	}
}

// relist queues the pods of a list, seen now, and returns its
// resourceVersion.
func (pw *podWatch) relist(ctx context.Context, client typedcorev1.PodInterface, selector string) (string, error) {
	list, err := client.List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return "", err
	}
	at := time.Now()
	for i := range list.Items {
		pw.send(ctx, podEvent{pod: &list.Items[i], at: at})
	}
	return list.ResourceVersion, nil
}

// waitQuiet reads the machine's busy share over benchQuiet until it is
// under benchQuietBusy or benchQuietWait has passed, and returns the
// last share and how long it waited.
func waitQuiet(ctx context.Context) (float64, time.Duration, error) {
	start := time.Now()
	for {
		m0, err := ReadMachineCPU()
		if err != nil {
			return 0, 0, err
		}
		select {
		case <-time.After(benchQuiet):
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		}
		m1, err := ReadMachineCPU()
		if err != nil {
			return 0, 0, err
		}
		busy := m0.BusyPercent(m1)
		if waited := time.Since(start); busy < benchQuietBusy || waited >= benchQuietWait {
			return busy, waited - benchQuiet, nil
		}
	}
}

// checkHeld checks that the IPAM holds an address for each of the pods
// (and no other).
func (bn *benchNode) checkHeld(ctx context.Context, pods int) error {
	held, err := bn.held(ctx)
	if err != nil {
		return err
	}
	if held != pods {
		return fmt.Errorf("%s holds %d addresses with %d pods Running", bn.ipam, held, pods)
	}
	return nil
}

// held counts the addresses the IPAM holds: the agent's allocations, or
// host-local's lease files (one per address, named by it).
func (bn *benchNode) held(ctx context.Context) (int, error) {
	if bn.ipam == benchContiv {
		allocs, err := bn.n.Allocations(ctx)
		return len(allocs), err
	}
	entries, err := os.ReadDir(bn.leases)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	count := 0
	for _, e := range entries {
		if _, err := netip.ParseAddr(e.Name()); err == nil {
			count++
		}
	}
	return count, nil
}

// counts are what the node holds: pods on it (every namespace), its
// sandboxes and the addresses its IPAM holds.
func (bn *benchNode) counts(ctx context.Context) (pods int, sandboxes []Sandbox, addrs int, err error) {
	list, err := bn.n.Kube.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, nil, 0, err
	}
	if sandboxes, err = bn.n.Containerd.Sandboxes(ctx); err != nil {
		return 0, nil, 0, err
	}
	addrs, err = bn.held(ctx)
	return len(list.Items), sandboxes, addrs, err
}

// waitClean waits until the node holds no pod, sandbox or address. Once
// no pod is left, it removes the stopped sandboxes every few seconds
// (crictl rmp, a CNI DEL each, answered at once since the pod's address
// is already free): what kubelet's garbage collection does within a
// minute. An rmp that fails (kubelet removing the same sandbox) is
// harmless: the next look tells.
func (bn *benchNode) waitClean(ctx context.Context) error {
	deadline := time.Now().Add(benchCleanTimeout)
	var lastRmp time.Time
	last := "nothing read"
	for {
		pods, sbs, addrs, err := bn.counts(ctx)
		if err == nil && pods == 0 && len(sbs) == 0 && addrs == 0 {
			return nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("%d pods, %d sandboxes, %d addresses held by %s", pods, len(sbs), addrs, bn.ipam)
		}
		if err == nil && pods == 0 && len(sbs) > 0 && time.Since(lastRmp) >= 5*time.Second {
			args := []string{"rmp"}
			for _, sb := range sbs {
				if sb.State != "SANDBOX_READY" {
					args = append(args, sb.ID)
				}
			}
			if len(args) > 1 {
				_, _ = bn.n.Containerd.Crictl(ctx, args...) // best effort, see above
			}
			lastRmp = time.Now()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the node is not clean after %s: %s", benchCleanTimeout, last)
		}
		select {
		case <-time.After(500 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// ms formats d in milliseconds for the log.
func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", msf(d)) }

// msf is d in milliseconds.
func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// TestBenchHelpers checks BenchmarkPodStartup's arithmetic: nearest-rank
// percentiles, the histogram read from Prometheus' text format, its
// difference and its quantiles.
func TestBenchHelpers(t *testing.T) {
	g := NewWithT(t)
	var ds []time.Duration
	for i := 1; i <= 30; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	g.Expect(Percentile(ds, 0.5)).To(Equal(15 * time.Millisecond))
	g.Expect(Percentile(ds, 0.99)).To(Equal(30*time.Millisecond), "at 30 values the p99 is the max")
	g.Expect(Percentile(ds, 1)).To(Equal(30 * time.Millisecond))
	g.Expect(Percentile(nil, 0.5)).To(BeZero())

	text := func(counts [4]int, sum float64) string {
		name := podDurationMetric
		return fmt.Sprintf("# HELP %[1]s x\n# TYPE %[1]s histogram\n"+
			"%[1]s_bucket{method=\"add\",le=\"0.001\"} %[2]d\n%[1]s_bucket{method=\"add\",le=\"0.0025\"} %[3]d\n"+
			"%[1]s_bucket{method=\"add\",le=\"0.005\"} %[4]d\n%[1]s_bucket{method=\"add\",le=\"+Inf\"} %[5]d\n"+
			"%[1]s_sum{method=\"add\"} %[6]g\n%[1]s_count{method=\"add\"} %[5]d\n"+
			"%[1]s_count{method=\"status\"} 3\ncontiv_podmanager_requests_total{method=\"add\",code=\"0\"} %[5]d\n",
			name, counts[0], counts[1], counts[2], counts[3], sum)
	}
	before, err := ParseHistograms(strings.NewReader(text([4]int{2, 2, 2, 2}, 0.001)), podDurationMetric, "method")
	g.Expect(err).NotTo(HaveOccurred())
	after, err := ParseHistograms(strings.NewReader(text([4]int{2, 12, 22, 22}, 0.061)), podDurationMetric, "method")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(after).To(HaveKey("status"))
	h := after["add"].Sub(before["add"])
	g.Expect(h.Count).To(Equal(20.0))
	g.Expect(h.Counts).To(Equal([]float64{0, 10, 20, 20}))
	p50, ok := h.Quantile(0.5)
	g.Expect(ok).To(BeTrue())
	g.Expect(p50).To(BeNumerically("~", 0.0025, 1e-12), "rank 10 ends the second bucket")
	p75, _ := h.Quantile(0.75)
	g.Expect(p75).To(BeNumerically("~", 0.00375, 1e-12), "half way into the third bucket")
	mean, _ := h.Mean()
	g.Expect(mean).To(BeNumerically("~", 0.003, 1e-12))
	_, ok = Histogram{}.Quantile(0.5)
	g.Expect(ok).To(BeFalse())
	g.Expect(math.IsInf(after["add"].Bounds[3], 1)).To(BeTrue())

	// containerd v2.4.2's lines (shortened IDs), a failed first attempt
	// and another pod's lines between them.
	crilog := `time="2026-11-28T19:42:20.777811737Z" level=info msg="RunPodSandbox for name:\"p-1\" uid:\"u1\" namespace:\"default\""
time="2026-11-28T19:42:20.800000000Z" level=error msg="RunPodSandbox for name:\"p-1\" uid:\"u1\" namespace:\"default\" failed, error" error="x"
time="2026-11-28T19:42:21.000000000Z" level=info msg="RunPodSandbox for name:\"p-2\" uid:\"u2\" namespace:\"default\""
time="2026-11-28T19:42:22.554619176Z" level=info msg="connecting to shim f26" address="unix:///run/x" namespace=k8s.io protocol=ttrpc version=3
time="2026-11-28T19:42:23.215773052Z" level=info msg="RunPodSandbox for name:\"p-1\" uid:\"u1\" namespace:\"default\" returns sandbox id \"f26\""
time="2026-11-28T19:42:23.225292919Z" level=info msg="CreateContainer within sandbox \"f26\" for container name:\"main\""
time="2026-11-28T19:42:23.274146485Z" level=info msg="CreateContainer within sandbox \"f26\" for name:\"main\" returns container id \"e9f\""
time="2026-11-28T19:42:23.279503068Z" level=info msg="StartContainer for \"e9f\""
time="2026-11-28T19:42:24.280808145Z" level=info msg="StartContainer for \"e9f\" returns successfully"
`
	tls, failures, err := ParseCRILog(strings.NewReader(crilog))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(failures).To(Equal(1))
	at := func(s string) time.Time { v, _ := time.Parse(time.RFC3339Nano, s); return v }
	g.Expect(tls).To(HaveKeyWithValue("p-1", &PodTimeline{SandboxAsked: at("2026-11-28T19:42:20.777811737Z"),
		SandboxReady: at("2026-11-28T19:42:23.215773052Z"), ContainerStarted: at("2026-11-28T19:42:24.280808145Z")}))
	g.Expect(tls).To(HaveKeyWithValue("p-2", &PodTimeline{SandboxAsked: at("2026-11-28T19:42:21Z")}))
}
