package agent_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra"
	"github.com/contiv-ipam/agent/infra/agent"
	"github.com/contiv-ipam/agent/infra/config"
)

// loaderPlugin is a testPlugin that loads its config ahead of Init.
type loaderPlugin struct {
	testPlugin
}

var _ infra.ConfigLoader = (*loaderPlugin)(nil)

func (p *loaderPlugin) LoadConfig() error {
	p.rec.add("load " + p.name)
	return p.fail("load")
}

func TestLoadConfigRunsOnEveryLoaderBeforeAnyInit(t *testing.T) {
	g := NewWithT(t)
	rec := &recorder{}
	a := newAgent(t, agent.Plugins(
		&loaderPlugin{testPlugin{name: "a", rec: rec}}, &testPlugin{name: "b", rec: rec},
		&loaderPlugin{testPlugin{name: "c", rec: rec}}))
	g.Expect(a.Start()).To(Succeed())
	g.Expect(a.Stop()).To(Succeed())
	g.Expect(rec.list()).To(Equal([]string{"load a", "load c", "init a", "init b", "init c",
		"after a", "after b", "after c", "close c", "close b", "close a"}))
}

func TestFailedLoadConfigStartsAndClosesNothing(t *testing.T) {
	g := NewWithT(t)
	rec := &recorder{}
	a := newAgent(t, agent.Plugins(
		&loaderPlugin{testPlugin{name: "a", rec: rec}}, &testPlugin{name: "b", rec: rec},
		&loaderPlugin{testPlugin{name: "c", rec: rec, failIn: "load"}}))
	g.Expect(a.Start()).To(MatchError("plugin c: load config: c failed in load"))
	g.Expect(a.Stop()).To(Succeed())
	g.Expect(rec.list()).To(Equal([]string{"load a", "load c"}), "no Init, no Close")
}

// A plugin that only embeds PluginDeps gets LoadConfig from it: its file is
// found, read and checked for YAML syntax before any plugin's Init.
func TestConfigFileProblemsStopStartBeforeAnyInit(t *testing.T) {
	dir := t.TempDir()
	broken := filepath.Join(dir, "broken.conf")
	NewWithT(t).Expect(os.WriteFile(broken, []byte("value: [\n"), 0o600)).To(Succeed())
	NewWithT(t).Expect(os.Mkdir(filepath.Join(dir, "two.conf"), 0o755)).To(Succeed())
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"broken YAML", []string{"-two-config", broken}, "plugin two: load config: config " + broken + ": invalid YAML"},
		{"missing file", []string{"-two-config", filepath.Join(dir, "gone.conf")},
			`plugin two: load config: config file "` + filepath.Join(dir, "gone.conf") + `" (flag -two-config): not found`},
		{"default file is a directory", []string{"-config-dir", dir},
			`plugin two: load config: config file "` + filepath.Join(dir, "two.conf") + `"`},
		{"config directory does not exist", []string{"-config-dir", filepath.Join(dir, "nope")},
			`config directory "` + filepath.Join(dir, "nope") + `" (flag -config-dir): does not exist`},
		{"config directory is a file", []string{"-config-dir", broken},
			`config directory "` + broken + `" (flag -config-dir): not a directory`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			rec := &recorder{}
			a, err := agent.NewAgent(quiet(), agent.QuitSignals(),
				agent.FlagSet(flag.NewFlagSet("t", flag.ContinueOnError)), agent.Args(tc.args),
				agent.Plugins(&testPlugin{name: "first", rec: rec}, newConfPlugin("one"), newConfPlugin("two")))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(a.Start()).To(MatchError(ContainSubstring(tc.want)))
			g.Expect(rec.list()).To(BeEmpty(), "no plugin's Init ran")
		})
	}
}

// A plugin whose Cfg is config.NoFile has no -<name>-config flag; the usage
// lists exactly the config flags of the plugins that read a file.
func TestOnlyPluginsWithAFileHaveAConfigFlag(t *testing.T) {
	g := NewWithT(t)
	none := newConfPlugin("none")
	none.Cfg = config.NoFile
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	var usage bytes.Buffer
	fs.SetOutput(&usage)
	_, err := agent.NewAgent(quiet(), agent.FlagSet(fs), agent.Args([]string{"-h"}),
		agent.Plugins(newConfPlugin("one"), none, newConfPlugin("two")))
	g.Expect(err).To(MatchError(flag.ErrHelp))
	flags := regexp.MustCompile(`(?m)^\s+-(\S+-config)\b`).FindAllStringSubmatch(usage.String(), -1)
	var names []string
	for _, f := range flags {
		names = append(names, f[1])
	}
	g.Expect(names).To(ConsistOf("one-config", "two-config"))
	g.Expect(usage.String()).To(ContainSubstring("-config-dir"))
	g.Expect(none.LoadConfig()).To(Succeed(), "nothing to check")
}
