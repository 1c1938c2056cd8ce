//go:build node

package node

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// What BenchmarkPodStartup measures besides the pods: a process's CPU
// time and peak RSS, the machine's busy share and load, and the agent's
// histograms of CNI calls.

// userHZ is the unit of utime and stime in /proc/<pid>/stat: USER_HZ,
// 100 on Linux whatever the kernel's HZ (the ABI fixes it).
const userHZ = 100

// ResetPeakRSS sets a process's VmHWM back to its current RSS (writing 5
// to /proc/<pid>/clear_refs; Linux 4.0 and later, root or the owner), so
// that PeakRSS then reads the peak since this call.
func ResetPeakRSS(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// PeakRSS is a process's VmHWM in bytes: its peak resident set since it
// started or since the last ResetPeakRSS.
func PeakRSS(pid int) (uint64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(v)
			if len(f) != 2 || f[1] != "kB" {
				return 0, fmt.Errorf("/proc/%d/status: VmHWM %q", pid, v)
			}
			kb, err := strconv.ParseUint(f[0], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/status: VmHWM: %w", pid, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmHWM", pid)
}

// MachineCPU is the machine's CPU time from /proc/stat (every core, in
// USER_HZ ticks): busy (user, nice, system, irq, softirq, steal) and the
// total with idle and iowait.
type MachineCPU struct{ Busy, Total uint64 }

// ReadMachineCPU reads the first line of /proc/stat.
func ReadMachineCPU() (MachineCPU, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return MachineCPU{}, err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return MachineCPU{}, fmt.Errorf("/proc/stat: first line %q", line)
	}
	var v [8]uint64
	for i := range v {
		if v[i], err = strconv.ParseUint(f[i+1], 10, 64); err != nil {
			return MachineCPU{}, fmt.Errorf("/proc/stat: %w", err)
		}
	}
	busy := v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
	return MachineCPU{Busy: busy, Total: busy + v[3] + v[4]}, nil
}

// BusyPercent is the share of the machine's CPU time that was busy
// between m and a later reading.
func (m MachineCPU) BusyPercent(later MachineCPU) float64 {
	if later.Total <= m.Total {
		return 0
	}
	return 100 * float64(later.Busy-m.Busy) / float64(later.Total-m.Total)
}

// Histogram is one series of a Prometheus histogram: cumulative counts
// by upper bound (ascending, +Inf last), the count and the sum.
type Histogram struct {
	Bounds []float64
	Counts []float64
	Count  float64
	Sum    float64
}

// Sub is h minus an earlier reading of the same series (what was
// observed between the two); an empty earlier reading subtracts nothing.
func (h Histogram) Sub(earlier Histogram) Histogram {
	out := Histogram{Bounds: slices.Clone(h.Bounds), Counts: slices.Clone(h.Counts), Count: h.Count - earlier.Count,
		Sum: h.Sum - earlier.Sum}
	for i, b := range earlier.Bounds {
		if j := slices.Index(out.Bounds, b); j >= 0 && i < len(earlier.Counts) {
			out.Counts[j] -= earlier.Counts[i]
		}
	}
	return out
}

// Quantile estimates the q-quantile (0 < q < 1) as Prometheus'
// histogram_quantile does: linear within the bucket holding the rank,
// the first bucket starting at 0; a rank in the +Inf bucket gives the
// largest finite bound. ok is false without observations.
func (h Histogram) Quantile(q float64) (v float64, ok bool) {
	if h.Count <= 0 || len(h.Bounds) == 0 {
		return 0, false
	}
	rank := q * h.Count
	for i, c := range h.Counts {
		if c < rank {
			continue
		}
		hi := h.Bounds[i]
		if math.IsInf(hi, 1) {
			if i == 0 {
				return 0, false
			}
			return h.Bounds[i-1], true
		}
		lo, prev := 0.0, 0.0
		if i > 0 {
			lo, prev = h.Bounds[i-1], h.Counts[i-1]
		}
		if c == prev {
			return hi, true
		}
		return lo + (hi-lo)*(rank-prev)/(c-prev), true
	}
	return h.Bounds[len(h.Bounds)-1], true
}

// Mean is the exact mean of the observations (sum over count).
func (h Histogram) Mean() (float64, bool) {
	if h.Count <= 0 {
		return 0, false
	}
	return h.Sum / h.Count, true
}

// ParseHistograms reads the series of the histogram name from Prometheus'
// text format, keyed by the value of the label key ("method").
func ParseHistograms(r io.Reader, name, key string) (map[string]Histogram, error) {
	out := map[string]Histogram{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		series, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return nil, fmt.Errorf("metric %q: %w", line, err)
		}
		metric, labels, _ := strings.Cut(series, "{")
		k := labelValue(labels, key)
		h := out[k]
		switch metric {
		case name + "_bucket":
			le, err := strconv.ParseFloat(labelValue(labels, "le"), 64)
			if err != nil {
				return nil, fmt.Errorf("metric %q: le: %w", line, err)
			}
			h.Bounds = append(h.Bounds, le)
			h.Counts = append(h.Counts, v)
		case name + "_sum":
			h.Sum = v
		case name + "_count":
			h.Count = v
		default:
			continue
		}
		out[k] = h
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for k, h := range out {
		idx := make([]int, len(h.Bounds))
		for i := range idx {
			idx[i] = i
		}
		slices.SortFunc(idx, func(a, b int) int { return cmpFloat(h.Bounds[a], h.Bounds[b]) })
		sorted := Histogram{Count: h.Count, Sum: h.Sum}
		for _, i := range idx {
			sorted.Bounds = append(sorted.Bounds, h.Bounds[i])
			sorted.Counts = append(sorted.Counts, h.Counts[i])
		}
		out[k] = sorted
	}
	return out, nil
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// labelValue is the value of label key in `a="x",b="y"}` ("" if absent;
// the values of these metrics hold no comma).
func labelValue(labels, key string) string {
	for _, kv := range strings.Split(strings.TrimSuffix(labels, "}"), ",") {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

// AgentHistograms reads the agent's histogram name from its /metrics,
// keyed by the label key.
func (n *Node) AgentHistograms(ctx context.Context, name, key string) (map[string]Histogram, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.Agent.REST+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s/metrics: %s", n.Agent.REST, resp.Status)
	}
	return ParseHistograms(resp.Body, name, key)
}

// Percentile is the q-quantile (0 < q <= 1) of sorted by nearest rank:
// the smallest value with at least q of the values at or below it.
func Percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// ProcTimes are a process's CPU times: its own (every thread), and its
// children's that it has waited for (cutime+cstime: a process that ran
// and ended under it, such as a CNI plugin under containerd).
type ProcTimes struct{ Self, Children time.Duration }

// Total is both.
func (t ProcTimes) Total() time.Duration { return t.Self + t.Children }

// ReadProcTimes reads a process's times from /proc/<pid>/stat.
func ReadProcTimes(pid int) (ProcTimes, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ProcTimes{}, err
	}
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return ProcTimes{}, fmt.Errorf("/proc/%d/stat: no ')' in %q", pid, data)
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 15 {
		return ProcTimes{}, fmt.Errorf("/proc/%d/stat: %d fields after the name", pid, len(f))
	}
	var ticks [4]int64 // utime, stime, cutime, cstime
	for j := range ticks {
		if ticks[j], err = strconv.ParseInt(f[11+j], 10, 64); err != nil {
			return ProcTimes{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
	}
	tick := time.Second / userHZ
	return ProcTimes{Self: time.Duration(ticks[0]+ticks[1]) * tick, Children: time.Duration(ticks[2]+ticks[3]) * tick}, nil
}

// Cmdline is a process's command line ([] once it has ended).
func Cmdline(pid int) []string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(data) == 0 {
		return nil
	}
	return strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
}

// Pids lists the processes of the machine whose command line satisfies
// match.
func Pids(match func(cmdline []string) bool) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if cmd := Cmdline(pid); len(cmd) > 0 && match(cmd) {
			out = append(out, pid)
		}
	}
	return out, nil
}

// CgroupPids lists the processes of the machine in a cgroup under root
// (in any hierarchy), such as kubelet's cgroupRoot: the pods' processes.
func CgroupPids(root string) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err != nil {
			continue // ended meanwhile
		}
		for _, line := range strings.Split(string(data), "\n") {
			// hierarchy-ID:controllers:path
			if f := strings.SplitN(line, ":", 3); len(f) == 3 && strings.HasPrefix(f[2], root+"/") {
				out = append(out, pid)
				break
			}
		}
	}
	return out, nil
}

// PodTimeline is what containerd's log tells of a pod's start (its CRI
// calls at info level, in containerd's clock, which is this machine's).
type PodTimeline struct {
	// SandboxAsked: the first RunPodSandbox for the pod began; it
	// returned at SandboxReady (the pause container and its network:
	// the CNI ADD).
	SandboxAsked, SandboxReady time.Time
	// ContainerStarted: StartContainer of its (last) container returned.
	ContainerStarted time.Time
}

// ParseCRILog reads containerd's log and returns the timeline of each pod
// by name, and how many CRI calls failed (level=error lines of
// RunPodSandbox, CreateContainer and StartContainer: kubelet tries
// again).
func ParseCRILog(r io.Reader) (map[string]*PodTimeline, int, error) {
	failures := 0
	out := map[string]*PodTimeline{}
	podOfSandbox := map[string]string{}
	sandboxOfContainer := map[string]string{}
	pod := func(name string) *PodTimeline {
		if out[name] == nil {
			out[name] = &PodTimeline{}
		}
		return out[name]
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		at, msg, ok := criLogLine(sc.Text())
		if !ok {
			continue
		}
		if (strings.Contains(msg, " failed, error") || strings.HasSuffix(msg, " failed")) && (strings.HasPrefix(msg, "RunPodSandbox ") ||
			strings.HasPrefix(msg, "CreateContainer ") || strings.HasPrefix(msg, "StartContainer ")) {
			failures++
			continue
		}
		switch {
		case strings.HasPrefix(msg, `RunPodSandbox for name:"`):
			name := quoted(msg, `name:"`)
			if id := quoted(msg, `returns sandbox id "`); id != "" {
				pod(name).SandboxReady = at
				podOfSandbox[id] = name
			} else if !strings.Contains(msg, "failed") && pod(name).SandboxAsked.IsZero() {
				pod(name).SandboxAsked = at
			}
		case strings.HasPrefix(msg, `CreateContainer within sandbox "`):
			if id := quoted(msg, `returns container id "`); id != "" {
				sandboxOfContainer[id] = quoted(msg, `within sandbox "`)
			}
		case strings.HasPrefix(msg, `StartContainer for "`) && strings.HasSuffix(msg, "returns successfully"):
			if name, ok := podOfSandbox[sandboxOfContainer[quoted(msg, `StartContainer for "`)]]; ok {
				pod(name).ContainerStarted = at
			}
		}
	}
	return out, failures, sc.Err()
}

// criLogLine splits a containerd log line (time="..." level=info
// msg="...") into its time and message.
func criLogLine(line string) (time.Time, string, bool) {
	ts, ok := strings.CutPrefix(line, `time="`)
	if !ok {
		return time.Time{}, "", false
	}
	ts, rest, ok := strings.Cut(ts, `"`)
	if !ok {
		return time.Time{}, "", false
	}
	at, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return time.Time{}, "", false
	}
	_, rest, ok = strings.Cut(rest, " msg=")
	if !ok {
		return time.Time{}, "", false
	}
	q, err := strconv.QuotedPrefix(rest)
	if err != nil {
		return time.Time{}, "", false
	}
	msg, err := strconv.Unquote(q)
	return at, msg, err == nil
}

// quoted is the text between prefix and the next double quote in s ("" if
// s lacks prefix).
func quoted(s, prefix string) string {
	_, rest, ok := strings.Cut(s, prefix)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}
