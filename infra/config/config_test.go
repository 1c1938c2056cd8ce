package config_test

import (
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/config"
)

type sample struct {
	Endpoint string        `json:"endpoint"`
	Timeout  time.Duration `json:"timeout"`
	Count    int           `json:"count"`
	Subnet   netip.Prefix  `json:"subnet"`
	Nested   struct {
		Enabled bool     `json:"enabled"`
		Names   []string `json:"names"`
	} `json:"nested"`
	Items []struct {
		Name string `json:"name"`
	} `json:"items"`
}

func write(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	NewWithT(t).Expect(os.WriteFile(p, []byte(body), 0o600)).To(Succeed())
	return p
}

func TestDecode(t *testing.T) {
	cases := []struct {
		name    string
		yaml    string
		wantErr string
		check   func(g *WithT, s sample)
	}{
		{name: "all kinds of values", yaml: "endpoint: 127.0.0.1:1\ntimeout: 150ms\ncount: 3\n" +
			"subnet: 10.1.0.0/16\nnested: {enabled: true, names: [a, b]}\nitems: [{name: x}]\n",
			check: func(g *WithT, s sample) {
				g.Expect(s.Endpoint).To(Equal("127.0.0.1:1"))
				g.Expect(s.Timeout).To(Equal(150 * time.Millisecond))
				g.Expect(s.Count).To(Equal(3))
				g.Expect(s.Subnet).To(Equal(netip.MustParsePrefix("10.1.0.0/16")))
				g.Expect(s.Nested.Names).To(Equal([]string{"a", "b"}))
				g.Expect(s.Items[0].Name).To(Equal("x"))
			}},
		{name: "IPv6 prefix", yaml: "subnet: fd00::/64\n", check: func(g *WithT, s sample) {
			g.Expect(s.Subnet).To(Equal(netip.MustParsePrefix("fd00::/64")))
		}},
		{name: "empty file keeps defaults", yaml: "", check: func(g *WithT, s sample) {
			g.Expect(s.Count).To(Equal(7))
		}},
		{name: "comments only keep defaults", yaml: "# nothing\n", check: func(g *WithT, s sample) {
			g.Expect(s.Count).To(Equal(7))
		}},
		{name: "unknown top-level key", yaml: "endpoint: x\nendpiont: y\n", wantErr: `unknown key "endpiont"`},
		{name: "unknown nested key", yaml: "nested: {enabld: true}\n", wantErr: `unknown key "nested.enabld"`},
		{name: "unknown key in list item", yaml: "items: [{nam: x}]\n", wantErr: `unknown key "items[0].nam"`},
		{name: "duplicate key", yaml: "count: 1\ncount: 2\n", wantErr: "count"},
		{name: "duration without unit", yaml: "timeout: 5\n", wantErr: `invalid duration 5`},
		{name: "bad duration", yaml: "timeout: soon\n", wantErr: `invalid duration "soon"`},
		{name: "wrong type names key", yaml: "count: many\n", wantErr: `"count"`},
		{name: "fraction into int", yaml: "count: 1.5\n", wantErr: `"count"`},
		{name: "bad prefix names value", yaml: "subnet: 10.1.0.0/33\n", wantErr: `10.1.0.0/33`},
		{name: "not a mapping", yaml: "- a\n- b\n", wantErr: "top level must be a mapping"},
		{name: "broken YAML", yaml: "a: [\n", wantErr: "invalid YAML"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s := sample{Count: 7}
			err := config.Decode([]byte(tc.yaml), &s, "test.conf")
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				g.Expect(err).To(MatchError(ContainSubstring("test.conf")), "error names the file")
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			tc.check(g, s)
		})
	}
}

// env builds a fake environment.
func env(kv ...string) config.Option {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return config.WithEnv(func(k string) (string, bool) { v, ok := m[k]; return v, ok })
}

func parsed(t *testing.T, c *config.FileConfig, args ...string) {
	t.Helper()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	c.RegisterFlags(fs)
	NewWithT(t).Expect(fs.Parse(args)).To(Succeed())
}

// The agent prefixes "plugin <name>: init:"; the error itself names the file.
func TestLoadValueErrorNamesFileAndKey(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	p := write(t, dir, "bad.conf", "count: 1\nbogus: true\n")
	var s sample
	_, err := config.ForPlugin("bad", config.WithPath(p)).LoadValue(&s)
	g.Expect(err).To(MatchError(ContainSubstring(p)))
	g.Expect(err).To(MatchError(ContainSubstring(`unknown key "bogus"`)))
}

func TestLookupWithoutFlagSet(t *testing.T) {
	g := NewWithT(t)
	lookup := func(k string) (string, bool) { return map[string]string{"HTTP_PORT": "8080"}[k], k == "HTTP_PORT" }
	v, explicit := config.Lookup(nil, "http-port", "9999", lookup)
	g.Expect(v).To(Equal("8080"))
	g.Expect(explicit).To(BeTrue())
	v, explicit = config.Lookup(nil, "other", "d", lookup)
	g.Expect(v).To(Equal("d"))
	g.Expect(explicit).To(BeFalse())
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte("endpoint: a\ntimeout: 1s\ncount: 2\nsubnet: 10.0.0.0/8\n"))
	f.Add([]byte("nested: {enabled: true, names: [x]}\nitems: [{name: y}]\n"))
	f.Add([]byte("- 1\n"))
	f.Add([]byte("timeout: 5\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var s sample
		_ = config.Decode(data, &s, "fuzz.conf") // must not panic
	})
}

// positive is a config whose Validate rejects a count below 1.
type positive struct {
	Count int `json:"count"`
}

func (p *positive) Validate() error {
	if p.Count < 1 {
		return fmt.Errorf("count %d: want at least 1", p.Count)
	}
	return nil
}

func TestLoadValidatesAndNamesTheSource(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	bad := write(t, dir, "p.conf", "count: 0\n")
	c := positive{Count: 5}
	err := config.Load(config.ForPlugin("p", config.WithPath(bad)), &c)
	g.Expect(err).To(MatchError(ContainSubstring("config " + bad + ": count 0: want at least 1")))

	good := write(t, dir, "q.conf", "count: 3\n")
	c = positive{Count: 5}
	g.Expect(config.Load(config.ForPlugin("q", config.WithPath(good)), &c)).To(Succeed())
	g.Expect(c.Count).To(Equal(3))

	t.Chdir(dir)
	c = positive{}
	err = config.Load(config.ForPlugin("absent"), &c)
	g.Expect(err).To(MatchError(ContainSubstring("config defaults: count 0")), "no file: the defaults are validated")
}

func TestNoFileKeepsTheDefaults(t *testing.T) {
	v := struct{ A int }{A: 7}
	found, err := config.NoFile.LoadValue(&v)
	if found || err != nil || v.A != 7 || config.NoFile.GetConfigName() != "" {
		t.Fatalf("NoFile: found=%v err=%v value=%d name=%q", found, err, v.A, config.NoFile.GetConfigName())
	}
}

func TestLoadOrFixed(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	file := config.ForPlugin("p", config.WithPath(write(t, dir, "p.conf", "count: 3\n")))

	c, err := config.LoadOrFixed(file, nil, positive{Count: 5})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Count).To(Equal(3), "without a fixed config the file is decoded over the defaults")

	fixed := &positive{Count: 9}
	c, err = config.LoadOrFixed(file, fixed, positive{Count: 5})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Count).To(Equal(9), "a fixed config wins over the file")
	c.Count = 1
	g.Expect(fixed.Count).To(Equal(9), "the result is a copy")

	_, err = config.LoadOrFixed(file, &positive{Count: 0}, positive{Count: 5})
	g.Expect(err).To(MatchError("count 0: want at least 1"), "a fixed config is validated")
}

func TestPreloaded(t *testing.T) {
	g := NewWithT(t)
	calls := 0
	load := func() (positive, error) {
		calls++
		if calls > 1 {
			return positive{}, fmt.Errorf("load %d", calls)
		}
		return positive{Count: 3}, nil
	}
	var p config.Preloaded[positive]
	g.Expect(p.Load(load)).To(Succeed())
	c, err := p.Get(load)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Count).To(Equal(3), "Get returns what Load kept, without loading again")
	g.Expect(calls).To(Equal(1))

	var fresh config.Preloaded[positive]
	_, err = fresh.Get(load)
	g.Expect(err).To(MatchError("load 2"), "without Load, Get loads now")
	g.Expect(fresh.Load(load)).To(MatchError("load 3"))
}
