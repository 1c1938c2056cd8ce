package report

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/perf/benchfmt"
)

// Set is every sample of every benchmark of one or more raw outputs.
type Set struct {
	names   []string                        // in first-seen order
	samples map[string]map[string][]float64 // name -> unit -> one value per run
	skips   map[string]string               // name -> reason of its skip
	fails   []string                        // names of failed benchmarks
	config  map[string]string               // goos, cpu, pkg...: the last value seen
}

// NewSet returns an empty set.
func NewSet() *Set {
	return &Set{samples: map[string]map[string][]float64{}, skips: map[string]string{}, config: map[string]string{}}
}

// Parse reads the output of go test -bench run with GOMAXPROCS procs into s.
// file names the output in errors.
func (s *Set) Parse(r io.Reader, file string, procs int) error {
	text, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("read %s: %w", file, err)
	}
	br := benchfmt.NewReader(strings.NewReader(string(text)), file)
	for br.Scan() {
		switch rec := br.Result().(type) {
		case *benchfmt.Result:
			s.add(rec, procs)
		case *benchfmt.SyntaxError:
			return fmt.Errorf("parse %s: %w", file, rec)
		}
	}
	if err := br.Err(); err != nil {
		return fmt.Errorf("parse %s: %w", file, err)
	}
	s.scanOutcomes(string(text), procs)
	return nil
}

func (s *Set) add(r *benchfmt.Result, procs int) {
	// benchfmt drops the "Benchmark" prefix; names here are as go test
	// printed them.
	name := trimProcs("Benchmark"+r.Name.String(), procs)
	units := s.samples[name]
	if units == nil {
		units = map[string][]float64{}
		s.samples[name] = units
		s.names = append(s.names, name)
	}
	for _, v := range r.Values {
		unit, val := v.Unit, v.Value
		if v.OrigUnit != "" {
			unit, val = v.OrigUnit, v.OrigValue
		}
		units[unit] = append(units[unit], val)
	}
	for _, c := range r.Config {
		if c.File {
			s.config[c.Key] = string(c.Value)
		}
	}
}

// scanOutcomes records the "--- SKIP" benchmarks with the "n/a:" line
// logged for them, and the "--- FAIL" ones. With go test -v a benchmark's
// log lines come between its name and its "--- SKIP" line; a reason is
// taken from the lines after the last benchmark name before the SKIP.
func (s *Set) scanOutcomes(text string, procs int) {
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	pending := ""
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "Benchmark"):
			pending = ""
		case strings.HasPrefix(line, "--- SKIP: "):
			name := trimProcs(strings.Fields(strings.TrimPrefix(line, "--- SKIP: "))[0], procs)
			if _, seen := s.skips[name]; !seen && pending != "" {
				s.skips[name] = pending
			}
			pending = ""
		case strings.HasPrefix(line, "--- FAIL: "):
			s.fails = append(s.fails, trimProcs(strings.Fields(strings.TrimPrefix(line, "--- FAIL: "))[0], procs))
			pending = ""
		default:
			if _, reason, ok := strings.Cut(line, "n/a:"); ok && pending == "" {
				pending = strings.TrimSpace(reason)
			}
		}
	}
}

// trimProcs cuts the "-N" go test appends to a benchmark name when
// GOMAXPROCS N is above 1.
func trimProcs(name string, procs int) string {
	if procs <= 1 {
		return name
	}
	return strings.TrimSuffix(name, "-"+strconv.Itoa(procs))
}

// Median returns the median of the samples of name in unit.
func (s *Set) Median(name, unit string) (float64, bool) {
	vals := s.samples[name][unit]
	if len(vals) == 0 {
		return 0, false
	}
	return median(vals), true
}

// Runs returns the number of samples of name in unit.
func (s *Set) Runs(name, unit string) int { return len(s.samples[name][unit]) }

// Skip returns the reason name was skipped as not applicable.
func (s *Set) Skip(name string) (string, bool) {
	r, ok := s.skips[name]
	return r, ok
}

// Failed returns the benchmarks that failed, sorted.
func (s *Set) Failed() []string {
	f := slices.Clone(s.fails)
	sort.Strings(f)
	return slices.Compact(f)
}

// Config returns a file configuration value (goos, goarch, cpu, pkg) as
// last seen.
func (s *Set) Config(key string) string { return s.config[key] }

// Names returns every benchmark name with samples or a skip, whose base
// (the part before the first "/") is base, in first-seen order; skipped
// names follow the measured ones.
func (s *Set) Names(base string) []string {
	var out []string
	for _, n := range s.names {
		if baseOf(n) == base {
			out = append(out, n)
		}
	}
	var skipped []string
	for n := range s.skips {
		if baseOf(n) == base && s.samples[n] == nil {
			skipped = append(skipped, n)
		}
	}
	sort.Strings(skipped)
	return append(out, skipped...)
}

func baseOf(name string) string {
	b, _, _ := strings.Cut(name, "/")
	return b
}

// median returns the median of vals (the mean of the middle two for an even
// count). vals is not modified.
func median(vals []float64) float64 {
	v := slices.Clone(vals)
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}
