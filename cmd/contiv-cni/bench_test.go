package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

// benchExec runs the binary b.N times with env and stdin and reports the
// p50 and p99 of one run (exec, config, gRPC dial and call, print).
func benchExec(b *testing.B, env []string, stdin string) {
	bin := filepath.Join(binDir, PluginType)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cmd := exec.Command(bin)
		cmd.Env = env
		cmd.Stdin = bytes.NewReader([]byte(stdin))
		start := time.Now()
		if out, err := cmd.Output(); err != nil {
			b.Fatalf("run %d: %v: %s", i, err, out)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkExecVersion is the floor of one exec of contiv-cni: VERSION
// talks to nobody.
func BenchmarkExecVersion(b *testing.B) {
	benchExec(b, []string{"CNI_COMMAND=VERSION"}, "")
}

// BenchmarkExecAdd is one ADD against an in-process agent that answers at
// once: what contiv-cni adds to the agent's own time.
func BenchmarkExecAdd(b *testing.B) {
	_, sock := startAgent(b)
	env := []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=" + testContainer, "CNI_NETNS=" + testNetns,
		"CNI_IFNAME=eth0", "CNI_PATH=" + binDir, "CNI_ARGS=" + testPodArgs}
	benchExec(b, env, ipamConf("1.0.0", sock, ""))
}
