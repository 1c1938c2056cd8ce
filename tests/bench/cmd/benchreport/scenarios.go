package main

import (
	"fmt"

	"github.com/contiv-ipam/agent/tests/bench/report"
)

// bench is a go test command line that runs only the benchmarks matching
// pattern in pkg.
func bench(dir, pkg, pattern, benchtime string, count int, extra ...string) report.Command {
	// -v: go test prints a skipped benchmark (and the reason it is not
	// applicable) only then.
	args := []string{"-run", "^$", "-bench", pattern, "-benchtime", benchtime, "-count", fmt.Sprint(count), "-timeout", "30m", "-v"}
	return report.Command{Dir: dir, Args: append(append(args, extra...), pkg)}
}

// cell is a target's figure: impl's median in unit in row key of t.
func cell(t report.Table, key, impl, unit string) func(*report.Set) (float64, bool) {
	return func(s *report.Set) (float64, bool) { return t.Cell(s, key, impl, unit) }
}

// ratio is a target's figure: num's median over den's in row key of t.
func ratio(t report.Table, key, num, den, unit string) func(*report.Set) (float64, bool) {
	return func(s *report.Set) (float64, bool) { return t.Ratio(s, key, num, den, unit) }
}

// scenarios are the sections of BENCHMARKS.md, in the order the issue
// lists them, and the order they run in.
var scenarios = []report.Scenario{
	engineScenario(),
	memoryScenario(),
	fsyncScenario(),
	durableScenario(),
	stackScenario(),
	cniScenario(),
	resyncScenario(),
	nodeIDScenario(),
	nodeCIDRScenario(),
	capiScenario(),
	startupScenario(),
	elasticScenario(),
	nodeScenario(),
	simScenario(),
}
