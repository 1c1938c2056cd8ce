// Package report turns the output of `go test -bench` into BENCHMARKS.md:
// a table per scenario with our figure, each peer's and their ratios, the
// method of each scenario, the targets with how far each is met or missed,
// and PNG plots (gonum/plot).
//
// # Names
//
// A benchmark's sub-names are key=value segments, the implementation last:
// BenchmarkEngine/pool=v4-16/fill=99/impl=cilium. A row of a table is one
// name without its implementation segment; a column is one implementation
// and one unit. A benchmark that does not apply to an implementation skips
// with a reason that starts with "n/a:", which the table shows as a note.
//
// # Figures
//
// Every run of a benchmark (go test -count N) is one sample; a cell is the
// median of its samples, in the unit the benchmark printed (ns/op, p50-ms,
// MiB...), not a converted one.
//
// # Caller duties
//
//  1. Parse every raw output into one Set (Parse, then Merge), passing the
//     GOMAXPROCS the benchmarks ran with, so that the "-N" suffix go test
//     appends is cut off exactly.
//  2. Render the scenarios in order with Write; it names the plot files it
//     wants written, which WritePlots draws.
//
// Owner: a Set is built by one goroutine and read-only afterwards.
package report
