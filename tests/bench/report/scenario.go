package report

import (
	"strings"
)

// Scenario is one section of the report: how it is run, how it is
// measured, and the tables drawn from its benchmarks.
type Scenario struct {
	ID      string // file names: raw output <ID>.txt, plots <ID>-*.png
	Title   string
	Method  string // markdown: runs, warm-up, what is timed, medians
	Run     Command
	Tables  []Table
	Targets []Target
	Notes   string // markdown shown after the tables
}

// Command is how the scenario's benchmarks run: go test with Args in Dir
// (relative to the repository root).
type Command struct {
	Dir  string
	Args []string
	Env  []string
}

// String is the command as a user types it from the repository root.
func (c Command) String() string {
	var b strings.Builder
	if c.Dir != "" && c.Dir != "." {
		b.WriteString("cd " + c.Dir + " && ")
	}
	for _, e := range c.Env {
		b.WriteString(e + " ")
	}
	b.WriteString("go test")
	for _, a := range c.Args {
		b.WriteString(" " + shellQuote(a))
	}
	return b.String()
}

func shellQuote(s string) string {
	if strings.ContainsAny(s, " $^|*?()[]{}'\"\\") {
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	return s
}

// Table is one table of a scenario: a row per benchmark name (without its
// implementation segment), a column per Column.
type Table struct {
	Bench   string // the benchmark's base name, e.g. BenchmarkEngine
	ImplKey string // the segment naming the implementation ("impl"); "" when there is none
	Caption string
	Columns []Column
	Plot    *Plot
}

// Column is one column: the figure of Impl in Unit, or, with Over set, the
// ratio of Impl's figure to Over's (both in Unit).
type Column struct {
	Header string
	Impl   string
	Unit   string
	Over   string
}

// Plot draws one unit of a table, one series per implementation, over the
// table's rows.
type Plot struct {
	Unit   string
	YLabel string
	Impls  []string
	Log    bool // log scale (points joined by lines); otherwise grouped bars
}

// Target is one figure the issue sets a limit for. Value returns the
// measured figure; Max says the figure must not exceed Limit (otherwise
// it must reach it). Bound says what bounds the figure, shown when it
// misses.
type Target struct {
	Text  string
	Unit  string
	Limit float64
	Max   bool
	Value func(*Set) (float64, bool)
	Bound string
}

// row returns the row key of name (the name after its base, without the
// implKey segment) and the implementation the segment names.
func row(name, implKey string) (key, impl string) {
	parts := strings.Split(name, "/")[1:]
	kept := parts[:0:0]
	for _, p := range parts {
		if k, v, ok := strings.Cut(p, "="); ok && implKey != "" && k == implKey {
			impl = v
			continue
		}
		kept = append(kept, p)
	}
	return strings.Join(kept, "/"), impl
}

// rows returns the distinct row keys of t's benchmarks in first-seen order,
// and the benchmark name of each (row, implementation).
func (t Table) rows(s *Set) ([]string, map[[2]string]string) {
	var keys []string
	names := map[[2]string]string{}
	for _, n := range s.Names(t.Bench) {
		key, impl := row(n, t.ImplKey)
		if _, seen := names[[2]string{key, impl}]; seen {
			continue
		}
		if !hasRow(names, key) {
			keys = append(keys, key)
		}
		names[[2]string{key, impl}] = n
	}
	return keys, names
}

func hasRow(names map[[2]string]string, key string) bool {
	for k := range names {
		if k[0] == key {
			return true
		}
	}
	return false
}

// Cell returns the median of Impl's benchmark in row key, in unit.
func (t Table) Cell(s *Set, key, impl, unit string) (float64, bool) {
	_, names := t.rows(s)
	n, ok := names[[2]string{key, impl}]
	if !ok {
		return 0, false
	}
	return s.Median(n, unit)
}

// Ratio returns Cell(num)/Cell(den) in row key.
func (t Table) Ratio(s *Set, key, num, den, unit string) (float64, bool) {
	a, ok1 := t.Cell(s, key, num, unit)
	b, ok2 := t.Cell(s, key, den, unit)
	if !ok1 || !ok2 || b == 0 {
		return 0, false
	}
	return a / b, true
}
