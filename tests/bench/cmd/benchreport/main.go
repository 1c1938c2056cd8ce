// Command benchreport runs the side-by-side benchmarks (`make bench`) and
// writes BENCHMARKS.md and its plots. Each scenario's go test output is
// kept in docs/bench/raw/<scenario>.txt; -reuse rebuilds the report from
// those files without running anything, -only runs a subset and reuses
// the others' last output.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/contiv-ipam/agent/tests/bench/report"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

type options struct {
	root   string
	out    string
	assets string
	only   []string
	reuse  bool
	list   bool
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("benchreport", flag.ContinueOnError)
	fs.StringVar(&o.root, "root", "", "the repository root (default: found from the working directory)")
	fs.StringVar(&o.out, "out", "BENCHMARKS.md", "the report, relative to the root")
	fs.StringVar(&o.assets, "assets", "docs/bench", "plots and raw outputs, relative to the root")
	only := fs.String("only", "", "comma-separated scenario IDs to run (the others' last raw output is reused)")
	fs.BoolVar(&o.reuse, "reuse", false, "run nothing: rebuild the report from the raw outputs")
	fs.BoolVar(&o.list, "list", false, "list the scenarios and their commands, run nothing")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if *only != "" {
		o.only = strings.Split(*only, ",")
		for _, id := range o.only {
			if !slices.ContainsFunc(scenarios, func(s report.Scenario) bool { return s.ID == id }) {
				return o, fmt.Errorf("-only: no scenario %q (see -list)", id)
			}
		}
	}
	if o.root == "" {
		root, err := findRoot()
		if err != nil {
			return o, err
		}
		o.root = root
	}
	return o, nil
}

// findRoot returns the nearest directory up from the working directory
// that holds the Makefile and go.mod of the agent.
func findRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if fileExists(filepath.Join(d, "Makefile")) && fileExists(filepath.Join(d, "go.mod")) &&
			fileExists(filepath.Join(d, "cmd", "contiv-agent")) {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no repository root above %s: pass -root", dir)
		}
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func run(args []string, stdout io.Writer) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	if o.list {
		for _, sc := range scenarios {
			_, _ = fmt.Fprintf(stdout, "%-9s %s\n          %s\n", sc.ID, sc.Title, sc.Run.String())
		}
		return nil
	}
	rawDir := filepath.Join(o.root, o.assets, "raw")
	if err := os.MkdirAll(rawDir, 0o755); err != nil {
		return err
	}
	procs := runtime.GOMAXPROCS(0)
	var failed []string
	if !o.reuse {
		failed = runAll(o, rawDir, procs, stdout)
	}
	set, ran, err := parseAll(rawDir, procs)
	if err != nil {
		return err
	}
	if err := write(o, set, ran); err != nil {
		return err
	}
	_, _ = fmt.Fprintf(stdout, "== wrote %s and the plots in %s\n", filepath.Join(o.root, o.out), filepath.Join(o.root, o.assets))
	if len(failed) > 0 {
		return fmt.Errorf("scenarios failed (their raw output says why): %s", strings.Join(failed, ", "))
	}
	return nil
}

// runAll runs the selected scenarios one after the other (they would
// disturb each other's figures) and returns the IDs of those that failed.
func runAll(o options, rawDir string, procs int, stdout io.Writer) []string {
	var failed []string
	total := time.Now()
	for _, sc := range scenarios {
		if len(o.only) > 0 && !slices.Contains(o.only, sc.ID) {
			continue
		}
		start := time.Now()
		_, _ = fmt.Fprintf(stdout, "== %s: %s\n", sc.ID, sc.Run.String())
		if err := runScenario(o.root, sc, filepath.Join(rawDir, sc.ID+".txt"), procs, stdout); err != nil {
			_, _ = fmt.Fprintf(stdout, "== %s failed: %v\n", sc.ID, err)
			failed = append(failed, sc.ID)
		}
		_, _ = fmt.Fprintf(stdout, "== %s took %.0f s\n", sc.ID, time.Since(start).Seconds())
	}
	_, _ = fmt.Fprintf(stdout, "== all scenarios took %.0f s\n", time.Since(total).Seconds())
	return failed
}

// runScenario runs the go test command of sc, its output going both to
// stdout and to the raw file, which starts with when and on what it ran.
func runScenario(root string, sc report.Scenario, raw string, procs int, stdout io.Writer) error {
	f, err := os.Create(raw)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }() // closed below on success; this covers the error paths
	_, _ = fmt.Fprintf(f, "# ran: %s\n# commit: %s\n# command: %s\n", time.Now().UTC().Format(time.RFC3339), commit(root), sc.Run.String())
	args := append([]string{"test", "-cpu", strconv.Itoa(procs)}, sc.Run.Args...)
	cmd := exec.Command("go", args...)
	cmd.Dir = filepath.Join(root, sc.Run.Dir)
	cmd.Env = append(os.Environ(), sc.Run.Env...)
	cmd.Stdout = io.MultiWriter(f, stdout)
	cmd.Stderr = cmd.Stdout
	if err := cmd.Run(); err != nil {
		_, _ = fmt.Fprintf(f, "# failed: %v\n", err)
		return err
	}
	return f.Close()
}

// parseAll reads the raw output of every scenario that has one, and
// returns the "# ran:" line of each.
func parseAll(rawDir string, procs int) (*report.Set, map[string]string, error) {
	set := report.NewSet()
	ran := map[string]string{}
	for _, sc := range scenarios {
		data, err := os.ReadFile(filepath.Join(rawDir, sc.ID+".txt"))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		if err := set.Parse(bytes.NewReader(data), sc.ID+".txt", procs); err != nil {
			return nil, nil, err
		}
		ran[sc.ID] = header(data)
	}
	return set, ran, nil
}

// header returns "<date> at <commit>" from the first lines of a raw output.
func header(data []byte) string {
	var date, rev string
	for _, line := range strings.SplitN(string(data), "\n", 4) {
		if v, ok := strings.CutPrefix(line, "# ran: "); ok {
			date = v
		}
		if v, ok := strings.CutPrefix(line, "# commit: "); ok {
			rev = v
		}
	}
	if date == "" {
		return ""
	}
	return date + " at " + rev
}

func write(o options, set *report.Set, ran map[string]string) error {
	scs := slices.Clone(scenarios)
	for i := range scs {
		if r := ran[scs[i].ID]; r != "" {
			scs[i].Method = strings.TrimSpace(scs[i].Method) + "\n\nLast run: " + r + "."
		}
	}
	h := report.Header{Date: time.Now().UTC().Format("2006-01-02 15:04 UTC"), Commit: commit(o.root), Machine: machine(), Command: "make bench"}
	var b bytes.Buffer
	if err := report.Write(&b, h, scs, set, o.assets); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.root, o.out), b.Bytes(), 0o644); err != nil {
		return err
	}
	_, err := report.WritePlots(filepath.Join(o.root, o.assets), scs, set)
	return err
}

// commit names the checked-out commit, "+dirty" when the tree has changes.
func commit(root string) string {
	out, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	rev := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
		rev += "+dirty"
	}
	return rev
}

// machine describes the CPU, cores, memory, kernel and Go of this machine.
func machine() string {
	cpu, mem := "unknown CPU", "unknown memory"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		if v := procField(string(data), "model name"); v != "" {
			cpu = v
		}
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		if v := procField(string(data), "MemTotal"); v != "" {
			if kb, err := strconv.Atoi(strings.Fields(v)[0]); err == nil {
				mem = fmt.Sprintf("%.0f GiB", float64(kb)/(1<<20))
			}
		}
	}
	kernel := "unknown kernel"
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = "Linux " + strings.TrimSpace(string(data))
	}
	return fmt.Sprintf("%s, %d cores (GOMAXPROCS %d), %s, %s, %s", cpu, runtime.NumCPU(), runtime.GOMAXPROCS(0), mem, kernel, runtime.Version())
}

// procField returns the value of the first "key: value" line of a /proc file.
func procField(text, key string) string {
	for _, line := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
