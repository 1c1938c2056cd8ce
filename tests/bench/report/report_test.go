package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// raw is go test -bench -count 3 output at GOMAXPROCS 2: two pools, three
// implementations, one of them not applicable to one pool, and one failure.
const raw = `goos: linux
goarch: amd64
pkg: github.com/contiv-ipam/agent/tests/bench/engine
cpu: AMD EPYC
BenchmarkEngine/pool=v4-16/fill=99/impl=contiv-2         	1000	        30.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkEngine/pool=v4-16/fill=99/impl=contiv-2         	1000	        20.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkEngine/pool=v4-16/fill=99/impl=contiv-2         	1000	        25.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkEngine/pool=v4-16/fill=99/impl=cilium-2         	1000	      2500 ns/op	      16 B/op	       1 allocs/op
BenchmarkEngine/pool=v4-16/fill=99/impl=bitmap-2         	1000	        20.0 ns/op
BenchmarkEngine/pool=v6-64/inuse=1048576/impl=cilium
    bench_test.go:80: n/a: cilium caps IPv6 ranges at 2^16 addresses
--- SKIP: BenchmarkEngine/pool=v6-64/inuse=1048576/impl=cilium
BenchmarkEngine/pool=v6-64/inuse=1048576/impl=k8s-service
    bench_test.go:80: n/a: the service allocator caps IPv6 too
--- SKIP: BenchmarkEngine/pool=v6-64/inuse=1048576/impl=k8s-service
BenchmarkEngine/pool=v6-64/inuse=1048576/impl=contiv-2   	1000	        40.0 ns/op
BenchmarkEngine/pool=v6-64/inuse=1048576/impl=bitmap-2   	1000	        10.0 ns/op
--- FAIL: BenchmarkEngine/pool=v4-12/fill=50/impl=contiv-keyed
    bench_test.go:99: boom
BenchmarkStart/etcd=embedded-2   	5	  120000000 ns/op	       118.0 p50-ms	       130.0 p99-ms
`

func parsed(t *testing.T) *Set {
	t.Helper()
	s := NewSet()
	if err := s.Parse(strings.NewReader(raw), "engine.txt", 2); err != nil {
		t.Fatal(err)
	}
	return s
}

var engine = Table{Bench: "BenchmarkEngine", ImplKey: "impl", Caption: "ns per release+allocate",
	Columns: []Column{
		{Header: "contiv", Impl: "contiv", Unit: "ns/op"},
		{Header: "cilium", Impl: "cilium", Unit: "ns/op"},
		{Header: "contiv ÷ bitmap", Impl: "contiv", Over: "bitmap", Unit: "ns/op"},
		{Header: "cilium ÷ contiv", Impl: "cilium", Over: "contiv", Unit: "ns/op"},
	},
	Plot: &Plot{Unit: "ns/op", YLabel: "ns/op", Impls: []string{"contiv", "cilium", "bitmap"}, Log: true},
}

func TestParseKeepsEveryRunAndTheMedian(t *testing.T) {
	g := NewWithT(t)
	s := parsed(t)
	name := "BenchmarkEngine/pool=v4-16/fill=99/impl=contiv"
	g.Expect(s.Runs(name, "ns/op")).To(Equal(3))
	g.Expect(med(s, name, "ns/op")).To(BeNumerically("==", 25))
	g.Expect(med(s, "BenchmarkStart/etcd=embedded", "p50-ms")).To(BeNumerically("==", 118))
	g.Expect(med(s, "BenchmarkStart/etcd=embedded", "ns/op")).To(BeNumerically("==", 120000000))
	reason, ok := s.Skip("BenchmarkEngine/pool=v6-64/inuse=1048576/impl=cilium")
	g.Expect(ok).To(BeTrue())
	g.Expect(reason).To(Equal("cilium caps IPv6 ranges at 2^16 addresses"))
	reason, _ = s.Skip("BenchmarkEngine/pool=v6-64/inuse=1048576/impl=k8s-service")
	g.Expect(reason).To(Equal("the service allocator caps IPv6 too"), "each skip gets the reason logged under its own name")
	g.Expect(s.Failed()).To(Equal([]string{"BenchmarkEngine/pool=v4-12/fill=50/impl=contiv-keyed"}))
	g.Expect(s.Config("cpu")).To(Equal("AMD EPYC"))
}

// med is the median of name in unit, -1 when there is none.
func med(s *Set, name, unit string) float64 {
	if v, ok := s.Median(name, unit); ok {
		return v
	}
	return -1
}

func TestMedianOfAnEvenCountIsTheMeanOfTheMiddleTwo(t *testing.T) {
	g := NewWithT(t)
	vals := []float64{4, 1, 3, 2}
	g.Expect(median(vals)).To(BeNumerically("==", 2.5))
	g.Expect(vals).To(Equal([]float64{4, 1, 3, 2}), "the caller's slice is not reordered")
}

func TestTrimProcsCutsOnlyTheGOMAXPROCSSuffix(t *testing.T) {
	g := NewWithT(t)
	g.Expect(trimProcs("BenchmarkX/pool=v6-64-2", 2)).To(Equal("BenchmarkX/pool=v6-64"))
	g.Expect(trimProcs("BenchmarkX/pool=v6-64", 1)).To(Equal("BenchmarkX/pool=v6-64"))
	g.Expect(trimProcs("BenchmarkX/callers=16-4", 4)).To(Equal("BenchmarkX/callers=16"))
}

func TestATableHasARowPerCaseAndRatiosAndNotes(t *testing.T) {
	g := NewWithT(t)
	var b strings.Builder
	writeTable(&b, engine, parsed(t))
	out := b.String()
	g.Expect(out).To(ContainSubstring("| case | contiv | cilium | contiv ÷ bitmap | cilium ÷ contiv |"))
	g.Expect(out).To(ContainSubstring("| pool=v4-16, fill=99 | 25.0 | 2,500 | 1.25× | 100× |"))
	g.Expect(out).To(ContainSubstring("| pool=v6-64, inuse=1048576 | 40.0 | n/a [1] | 4.00× | n/a [1] |"))
	g.Expect(out).To(ContainSubstring("[1] cilium: cilium caps IPv6 ranges at 2^16 addresses"))
}

func TestTargetsSayHowFarTheyAreMissedAndWhy(t *testing.T) {
	g := NewWithT(t)
	s := parsed(t)
	ratio := func(s *Set) (float64, bool) {
		return engine.Ratio(s, "pool=v4-16/fill=99", "contiv", "bitmap", "ns/op")
	}
	met := Target{Text: "≤ 1.5× bitmap", Unit: "×", Limit: 1.5, Max: true, Value: ratio}
	missed := Target{Text: "≤ 1.1× bitmap", Unit: "×", Limit: 1.1, Max: true, Value: ratio, Bound: "The cursor scan."}
	floor := Target{Text: "≥ 50", Unit: "×", Limit: 50, Value: ratio, Bound: "Nothing."}
	v, ok := ratio(s)
	g.Expect(verdict(met, v, ok)).To(Equal("met"))
	g.Expect(verdict(missed, v, ok)).To(Equal("**missed** by 14 % (1.14× the limit). The cursor scan."))
	g.Expect(verdict(floor, v, ok)).To(Equal("**missed** by 98 % (0.03 of the limit). Nothing."))
	g.Expect(verdict(met, 0, false)).To(ContainSubstring("did not run"))
}

func TestWriteRendersEveryScenarioAndItsPlotLink(t *testing.T) {
	g := NewWithT(t)
	sc := Scenario{ID: "engine", Title: "Engine", Method: "One op is a release and an allocate.",
		Run:    Command{Dir: "tests/bench", Args: []string{"-run", "^$", "-bench", "^BenchmarkEngine$", "./engine/"}},
		Tables: []Table{engine}}
	var b bytes.Buffer
	g.Expect(Write(&b, Header{Date: "today", Commit: "abc", Machine: "2 cores", Command: "make bench"}, []Scenario{sc}, parsed(t), "docs/bench")).To(Succeed())
	out := b.String()
	g.Expect(out).To(ContainSubstring("## 1. Engine"))
	g.Expect(out).To(ContainSubstring("Command: `cd tests/bench && go test -run '^$' -bench '^BenchmarkEngine$' ./engine/`"))
	g.Expect(out).To(ContainSubstring("![ns per release+allocate](docs/bench/engine-1.png)"))
	g.Expect(out).To(ContainSubstring("`BenchmarkEngine/pool=v4-12/fill=50/impl=contiv-keyed`"), "failures are listed")
}

func TestWritePlotsDrawsAPNGPerPlottedTable(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	bars := engine
	bars.Plot = &Plot{Unit: "ns/op", YLabel: "ns/op", Impls: []string{"contiv", "cilium"}}
	scs := []Scenario{{ID: "log", Tables: []Table{engine}}, {ID: "bars", Tables: []Table{bars}}}
	files, err := WritePlots(dir, scs, parsed(t))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files).To(Equal([]string{filepath.Join(dir, "log-1.png"), filepath.Join(dir, "bars-1.png")}))
	for _, f := range files {
		data, err := os.ReadFile(f)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(data[:8]).To(Equal([]byte("\x89PNG\r\n\x1a\n")))
	}
}

func TestNumbersHaveThreeSignificantDigits(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Number(1234567)).To(Equal("1,234,567"))
	g.Expect(Number(123.4)).To(Equal("123"))
	g.Expect(Number(12.34)).To(Equal("12.3"))
	g.Expect(Number(1.234)).To(Equal("1.23"))
	g.Expect(Number(0.01234)).To(Equal("0.0123"))
	g.Expect(Ratio(0.5)).To(Equal("0.50×"))
	g.Expect(Ratio(123.4)).To(Equal("123×"))
}
