package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// procInfo identifies one process: a PID and its start time (so that a
// reused PID is not taken for the process).
type procInfo struct {
	pid   int
	ppid  int
	comm  string
	state byte
	start string // field 22 of /proc/<pid>/stat, in clock ticks since boot
}

// readStat reads /proc/<pid>/stat; ok is false when the process is gone.
func readStat(pid int) (procInfo, bool) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procInfo{}, false
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses.
	open, end := bytes.IndexByte(data, '('), bytes.LastIndexByte(data, ')')
	if open < 0 || end < open {
		return procInfo{}, false
	}
	rest := strings.Fields(string(data[end+1:]))
	if len(rest) < 20 {
		return procInfo{}, false
	}
	ppid, _ := strconv.Atoi(rest[1])
	return procInfo{pid: pid, ppid: ppid, comm: string(data[open+1 : end]), state: rest[0][0], start: rest[19]}, true
}

// descendants lists every process whose parent chain leads to root.
func descendants(root int) []procInfo {
	entries, _ := os.ReadDir("/proc")
	children := map[int][]procInfo{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := readStat(pid); ok {
			children[p.ppid] = append(children[p.ppid], p)
		}
	}
	var out []procInfo
	queue := []int{root}
	for len(queue) > 0 {
		next := queue[0]
		queue = queue[1:]
		for _, c := range children[next] {
			out = append(out, c)
			queue = append(queue, c.pid)
		}
	}
	return out
}

// alive tells whether p still runs: its PID exists with the same start
// time and is not a zombie (an ended process nobody has reaped yet).
func alive(p procInfo) bool {
	now, ok := readStat(p.pid)
	return ok && now.start == p.start && now.state != 'Z'
}

// survivors are the processes of ps still alive.
func survivors(ps []procInfo) []string {
	var out []string
	for _, p := range ps {
		if alive(p) {
			out = append(out, p.comm+"/"+strconv.Itoa(p.pid))
		}
	}
	return out
}

// comms counts the processes of ps by command name.
func comms(ps []procInfo) map[string]int {
	out := map[string]int{}
	for _, p := range ps {
		out[p.comm]++
	}
	return out
}
