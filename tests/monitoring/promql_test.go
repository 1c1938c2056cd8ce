package monitoring

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		name, expr string
		want       []string
	}{
		{"bare", "up", []string{"up"}},
		{"rate over a range", "rate(foo_total[5m])", []string{"foo_total"}},
		{"aggregation modifiers before and after",
			"sum by (node, family) (rate(a[5m])) / on(node) group_left(subnet) sum(b) without (x)", []string{"a", "b"}},
		{"group_left without labels", "a * on (node) group_left b", []string{"a", "b"}},
		{"grafana variables", `histogram_quantile(0.99, sum by (le) (rate(x_bucket{method="add",node=~"$node"}[$__rate_interval])))`,
			[]string{"x_bucket"}},
		{"grafana braces and old syntax", `rate(y{node="${node:raw}"}[[interval]]) > $threshold`, []string{"y"}},
		{"__name__ matcher", `{__name__="foo", job="a"}`, []string{"foo"}},
		{"quoted name", `{"my.metric", job="a"}`, []string{"my.metric"}},
		{"offset and @", "foo offset 5m and bar @ start() unless baz offset -1h30m", []string{"foo", "bar", "baz"}},
		{"strings are not names", `label_replace(up{job="a"}, "dst", "$1", "src", "(.*)")`, []string{"up"}},
		{"count_values label", `count_values("value", build_version)`, []string{"build_version"}},
		{"bool and numbers", "a > bool 1e-3 or b < 0x1F or c != Inf or d == NaN", []string{"a", "b", "c", "d"}},
		{"functions without metrics", "time() - vector(1) + scalar(e)", []string{"e"}},
		{"label values with brackets", `foo{a="}", b="{[("}`, []string{"foo"}},
		{"comments", "# the first line names nothing: foo\nbar # nor this: baz", []string{"bar"}},
		{"subquery", "max_over_time(rate(x[5m])[1h:1m])", []string{"x"}},
		{"ignoring and atan2", "1 - (a / ignoring(state) b) atan2 c", []string{"a", "b", "c"}},
		{"each once, first-seen order", "b + a + b", []string{"b", "a"}},
		{"recording rule names", "job:rate5m:sum > 1", []string{"job:rate5m:sum"}},
		{"topk with a parameter", "topk(5, x) by (y)", []string{"x"}},
		{"predict_linear", `predict_linear(free{state="free"}[1h], 3600) <= 0`, []string{"free"}},
		{"absent", "absent(up{job='x'})", []string{"up"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := MetricNames(tc.expr)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

func TestMetricNamesErrors(t *testing.T) {
	for _, tc := range []struct{ name, expr, want string }{
		{"name by regexp", `{__name__=~"contiv_.*"}`, "regular expression"},
		{"unclosed paren", "rate(x[5m]", "unbalanced"},
		{"unclosed range", "rate(x[5m)", "unbalanced"},
		{"unclosed braces", `x{a="b"`, "unbalanced"},
		{"stray closer", "x)", "unbalanced"},
		{"unterminated string", `x{a="b}`, "unterminated string"},
		{"label without matcher", `x{a}`, `label "a" without a matcher`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := MetricNames(tc.expr)
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
		})
	}
}
