package sim

import (
	"context"
	"os"
	"runtime"
	"slices"
	"syscall"
	"time"
)

// snapshot is what the process and the etcd members used up to a moment.
type snapshot struct {
	at      time.Time
	cpu     time.Duration // this process, getrusage
	rss     int64         // this process, /proc/self/stat
	heap    uint64        // runtime.MemStats.HeapInuse
	fds     int           // open file descriptors of this process
	members []MemberStats // nil entries' names say which member was down
}

// take reads the process's figures and every running member's.
func (s *Sim) take(ctx context.Context) snapshot {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	snap := snapshot{at: time.Now(), cpu: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), heap: ms.HeapInuse}
	_, snap.rss, _ = procStat(os.Getpid())
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		snap.fds = len(ents)
	}
	for _, m := range s.Etcd.Members {
		st, err := m.Stats(ctx)
		if err != nil {
			st = MemberStats{Name: m.Name}
		}
		snap.members = append(snap.members, st)
	}
	return snap
}

// Usage is what a phase cost: the process's (all nodes) and each etcd
// member's.
type Usage struct {
	Nodes   int     `json:"nodes"`
	Seconds float64 `json:"seconds"`
	// CPUPerNodeMs is the process's CPU time in the phase over the nodes
	// (getrusage); Cores is the process's CPU time over the wall time.
	CPUPerNodeMs float64 `json:"cpuPerNodeMs"`
	Cores        float64 `json:"cores"`
	// RSSPerNodeKiB is the process's RSS at the end over the nodes;
	// HeapPerNodeKiB the Go heap in use (HeapInuse) over the nodes.
	RSSPerNodeKiB  float64 `json:"rssPerNodeKiB"`
	HeapPerNodeKiB float64 `json:"heapPerNodeKiB"`
	RSSMiB         float64 `json:"rssMiB"`
	FDs            int     `json:"fds"`
	// Etcd is each member's part; EtcdTotal their sum.
	Etcd      []MemberUsage `json:"etcd"`
	EtcdTotal MemberUsage   `json:"etcdTotal"`
}

// MemberUsage is one member's part of a phase: deltas of its counters
// (0 when it restarted in the phase: the counters start again) and its
// CPU.
type MemberUsage struct {
	Name        string  `json:"name"`
	WatchEvents float64 `json:"watchEvents"`
	SentMiB     float64 `json:"sentMiB"`
	CPUSeconds  float64 `json:"cpuSeconds"`
	RSSMiB      float64 `json:"rssMiB"`
}

// usage is the difference of two snapshots over nodes nodes.
func usage(a, b snapshot, nodes int) Usage {
	u := Usage{Nodes: nodes, Seconds: b.at.Sub(a.at).Seconds(), RSSMiB: float64(b.rss) / (1 << 20), FDs: b.fds}
	cpu := (b.cpu - a.cpu).Seconds()
	if u.Seconds > 0 {
		u.Cores = cpu / u.Seconds
	}
	if nodes > 0 {
		u.CPUPerNodeMs = cpu * 1000 / float64(nodes)
		u.RSSPerNodeKiB = float64(b.rss) / 1024 / float64(nodes)
		u.HeapPerNodeKiB = float64(b.heap) / 1024 / float64(nodes)
	}
	for i, m := range b.members {
		mu := MemberUsage{Name: m.Name, RSSMiB: float64(m.RSS) / (1 << 20)}
		if i < len(a.members) {
			p := a.members[i]
			// A restarted member's counters start again: its delta is
			// from zero.
			if m.WatchEvents < p.WatchEvents || m.CPU < p.CPU {
				p = MemberStats{}
			}
			mu.WatchEvents = m.WatchEvents - p.WatchEvents
			mu.SentMiB = (m.SentBytes - p.SentBytes) / (1 << 20)
			mu.CPUSeconds = (m.CPU - p.CPU).Seconds()
		}
		u.Etcd = append(u.Etcd, mu)
		u.EtcdTotal.WatchEvents += mu.WatchEvents
		u.EtcdTotal.SentMiB += mu.SentMiB
		u.EtcdTotal.CPUSeconds += mu.CPUSeconds
		u.EtcdTotal.RSSMiB += mu.RSSMiB
	}
	u.EtcdTotal.Name = "all"
	return u
}

// Dist summarises durations, in milliseconds.
type Dist struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50Ms"`
	P99   float64 `json:"p99Ms"`
	Max   float64 `json:"maxMs"`
}

// dist sorts ds and summarises them (nearest rank).
func dist(ds []time.Duration) Dist {
	if len(ds) == 0 {
		return Dist{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := func(q float64) float64 {
		i := int(q*float64(len(s))+0.999999) - 1
		i = min(max(i, 0), len(s)-1)
		return float64(s[i]) / float64(time.Millisecond)
	}
	return Dist{Count: len(s), P50: rank(0.50), P99: rank(0.99), Max: float64(s[len(s)-1]) / float64(time.Millisecond)}
}
