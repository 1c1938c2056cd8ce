package agent_test

import (
	"flag"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra"
	"github.com/contiv-ipam/agent/infra/agent"
)

func names(ps []infra.Plugin) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}

// group is an embedded struct of plugins, like an app grouping its parts.
type group struct {
	X *testPlugin
	Y infra.Plugin
}

// app is a top-level plugin with plugin fields of every supported shape.
type app struct {
	testPlugin
	group
	First   *testPlugin
	List    []*testPlugin
	Nothing *testPlugin // nil: skipped
	NotDep  *notAPlugin
	private *testPlugin //nolint:unused // unexported: skipped
}

// notAPlugin has Init but no Close.
type notAPlugin struct{ Inner *testPlugin }

func (n *notAPlugin) Init() error { return nil }

func TestAllPluginsOrder(t *testing.T) {
	rec := &recorder{}
	mk := func(n string) *testPlugin { return &testPlugin{name: n, rec: rec} }
	c := mk("c")
	b := mk("b")
	b.DepField = c
	d := mk("d")
	a := mk("a")
	a.Deps = []infra.Plugin{b, d}
	cyc1, cyc2 := mk("hw"), mk("hu")
	cyc1.DepField, cyc2.DepField = cyc2, cyc1
	shared := mk("shared")
	x := mk("x")
	x.DepField = shared

	cases := []struct {
		name  string
		roots []infra.Plugin
		want  []string
	}{
		{"no deps", []infra.Plugin{mk("solo")}, []string{"solo"}},
		{"two levels A{B{C}, D}", []infra.Plugin{a}, []string{"c", "b", "d", "a"}},
		{"cycle", []infra.Plugin{cyc1}, []string{"hu", "hw"}},
		{"shared dependency listed once", []infra.Plugin{x, shared}, []string{"shared", "x"}},
		{"struct shapes", []infra.Plugin{&app{
			testPlugin: testPlugin{name: "top", rec: rec},
			group:      group{X: mk("gx"), Y: mk("gy")},
			First:      mk("first"),
			List:       []*testPlugin{mk("l1"), mk("l2")},
			NotDep:     &notAPlugin{Inner: mk("hidden")},
			private:    mk("private"),
		}}, []string{"gx", "gy", "first", "l1", "l2", "top"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ag, err := agent.NewAgent(agent.AllPlugins(tc.roots...), agent.Args(nil), quiet(),
				agent.FlagSet(flag.NewFlagSet("x", flag.ContinueOnError)))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(names(ag.Plugins())).To(Equal(tc.want))
		})
	}
}

// Base is an exported plugin type that other plugins embed.
type Base struct{ testPlugin }

// derived embeds a plugin: it is that plugin, not a dependent of it.
type derived struct {
	Base
	Dep *testPlugin
}

func TestEmbeddedPluginIsNotADependency(t *testing.T) {
	g := NewWithT(t)
	rec := &recorder{}
	d := &derived{Base: Base{testPlugin{name: "derived", rec: rec}}, Dep: &testPlugin{name: "dep", rec: rec}}
	ag, err := agent.NewAgent(agent.AllPlugins(d), agent.Args(nil), quiet(),
		agent.FlagSet(flag.NewFlagSet("x", flag.ContinueOnError)))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(ag.Plugins())).To(Equal([]string{"dep", "derived"}))
}

func TestDuplicateNameIsAnError(t *testing.T) {
	g := NewWithT(t)
	rec := &recorder{}
	one := &testPlugin{name: "same", rec: rec}
	two := &testPlugin{name: "same", rec: rec}
	_, err := agent.NewAgent(agent.AllPlugins(&testPlugin{name: "top", rec: rec, Deps: []infra.Plugin{one, two}}),
		agent.Args(nil), quiet())
	g.Expect(err).To(MatchError(ContainSubstring(`two different plugins are named "same"`)))
	_, err = agent.NewAgent(agent.Plugins(one, two), agent.Args(nil), quiet())
	g.Expect(err).To(HaveOccurred())
}

func TestNilTopLevelPluginIsAnError(t *testing.T) {
	g := NewWithT(t)
	var p *testPlugin
	_, err := agent.NewAgent(agent.AllPlugins(p), agent.Args(nil), quiet())
	g.Expect(err).To(MatchError(ContainSubstring("must be a non-nil pointer")))
}
