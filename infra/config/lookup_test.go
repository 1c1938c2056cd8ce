package config_test

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/config"
)

// lookupTree is the file tree of TestLookupOrder, under the working
// directory root:
//
//	p.conf            count 1  (the default in the working directory)
//	env.conf          count 2
//	flag.conf         count 3
//	rel.conf          count 7  (a relative explicit path: this one)
//	etc/p.conf        count 4  (the default in the config directory)
//	etc/rel.conf      count 5  (never read through a relative path)
//	etc/only.conf     count 8  (only in the config directory)
//	etc2/p.conf       count 6  (a second config directory)
//	empty/            (a config directory without p.conf)
//	isdir/p.conf/     (a directory where the default file should be)
//	p.conf.d/         (a directory named as a file)
//	w.conf/           (a directory where plugin w's default file should be)
//	link/p.conf       -> missing (a dangling symbolic link)
//	unreadable/p.conf -> /proc/self/mem (exists, every read fails)
//	afile             (a file named as the config directory)
type lookupTree struct{ root string }

func newLookupTree(t *testing.T) lookupTree {
	t.Helper()
	g := NewWithT(t)
	root := t.TempDir()
	for _, d := range []string{"etc", "etc2", "empty", "isdir/p.conf", "p.conf.d", "w.conf", "link", "unreadable"} {
		g.Expect(os.MkdirAll(filepath.Join(root, d), 0o755)).To(Succeed())
	}
	for name, count := range map[string]string{"p.conf": "1", "env.conf": "2", "flag.conf": "3", "rel.conf": "7",
		"etc/p.conf": "4", "etc/rel.conf": "5", "etc2/p.conf": "6", "etc/only.conf": "8", "afile": "0"} {
		write(t, root, name, "count: "+count+"\n")
	}
	g.Expect(os.Symlink(filepath.Join(root, "missing"), filepath.Join(root, "link", "p.conf"))).To(Succeed())
	g.Expect(os.Symlink("/proc/self/mem", filepath.Join(root, "unreadable", "p.conf"))).To(Succeed())
	return lookupTree{root: root}
}

func (l lookupTree) abs(rel string) string { return filepath.Join(l.root, rel) }

// TestLookupOrder checks the order docs/configuration.md states (tests/docs
// checks that the page still states it):
// the flag -p-config, else env P_CONFIG, else p.conf in -config-dir (else
// env CONFIG_DIR, else the working directory), and that every path that
// cannot be right is refused with an error naming the flag or env and the
// path.
func TestLookupOrder(t *testing.T) {
	tree := newLookupTree(t)
	t.Chdir(tree.root)
	cases := []struct {
		name    string
		plugin  string
		args    []string
		env     []string
		count   int    // the file read (0: none, the defaults)
		wantErr string // a substring of the error
	}{
		// Precedence.
		{name: "nothing given: the default in the working directory", count: 1},
		{name: "-config-dir beats a p.conf in the working directory", args: []string{"-config-dir", "etc"}, count: 4},
		{name: "CONFIG_DIR beats a p.conf in the working directory", env: []string{"CONFIG_DIR", "etc"}, count: 4},
		{name: "-config-dir beats CONFIG_DIR", args: []string{"-config-dir", "etc2"}, env: []string{"CONFIG_DIR", "etc"}, count: 6},
		{name: "env beats the config directory", args: []string{"-config-dir", "etc"}, env: []string{"P_CONFIG", "env.conf"}, count: 2},
		{name: "flag beats env", args: []string{"-p-config", "flag.conf"}, env: []string{"P_CONFIG", "env.conf"}, count: 3},
		{name: "flag beats env beats the config directory", args: []string{"-p-config", "flag.conf", "-config-dir", "etc"},
			env: []string{"P_CONFIG", "env.conf", "CONFIG_DIR", "etc2"}, count: 3},
		{name: "a config directory without the file: the defaults, not the working directory",
			args: []string{"-config-dir", "empty"}, count: 0},
		{name: "an empty CONFIG_DIR is unset", env: []string{"CONFIG_DIR", ""}, count: 1},
		{name: "an empty P_CONFIG is unset", env: []string{"P_CONFIG", ""}, count: 1},
		{name: "dashed plugin name maps to env", plugin: "my-p", env: []string{"MY_P_CONFIG", "env.conf"}, count: 2},
		{name: "no file anywhere: the defaults", plugin: "absent", count: 0},
		// Relative and absolute paths.
		{name: "relative -config-dir is relative to the working directory", args: []string{"-config-dir", "./etc"}, count: 4},
		{name: "absolute -config-dir", args: []string{"-config-dir", tree.abs("etc")}, count: 4},
		{name: "absolute CONFIG_DIR", env: []string{"CONFIG_DIR", tree.abs("etc2")}, count: 6},
		{name: "relative flag path is relative to the working directory, not -config-dir",
			args: []string{"-p-config", "rel.conf", "-config-dir", "etc"}, count: 7},
		{name: "relative env path is relative to the working directory, not CONFIG_DIR",
			env: []string{"P_CONFIG", "rel.conf", "CONFIG_DIR", "etc"}, count: 7},
		{name: "absolute flag path", args: []string{"-p-config", tree.abs("etc/rel.conf"), "-config-dir", "etc2"}, count: 5},
		{name: "absolute env path", env: []string{"P_CONFIG", tree.abs("etc/rel.conf")}, count: 5},
		// What cannot be right.
		{name: "-config-dir does not exist", args: []string{"-config-dir", "nope"},
			wantErr: `config directory "nope" (flag -config-dir): does not exist`},
		{name: "CONFIG_DIR does not exist", env: []string{"CONFIG_DIR", tree.abs("nope")},
			wantErr: `config directory "` + tree.abs("nope") + `" (env CONFIG_DIR): does not exist`},
		{name: "-config-dir does not exist, though P_CONFIG is given", args: []string{"-config-dir", "nope"},
			env: []string{"P_CONFIG", "env.conf"}, count: 2},
		{name: "-config-dir is a file", args: []string{"-config-dir", "afile"},
			wantErr: `config directory "afile" (flag -config-dir): not a directory`},
		{name: "CONFIG_DIR is a file", env: []string{"CONFIG_DIR", "afile"},
			wantErr: `config directory "afile" (env CONFIG_DIR): not a directory`},
		{name: "-config-dir empty", args: []string{"-config-dir", ""}, wantErr: `config directory (flag -config-dir): empty path`},
		{name: "flag path does not exist", args: []string{"-p-config", "/nonexistent/p.conf"},
			wantErr: `config file "/nonexistent/p.conf" (flag -p-config): not found`},
		{name: "env path does not exist", env: []string{"P_CONFIG", "nope.conf"},
			wantErr: `config file "nope.conf" (env P_CONFIG): not found`},
		{name: "relative flag path: the working directory's file, not the config directory's",
			args: []string{"-p-config", "p.conf", "-config-dir", "etc2"}, count: 1},
		{name: "relative flag path only in -config-dir", args: []string{"-p-config", "only.conf", "-config-dir", "etc"},
			wantErr: `config file "only.conf" (flag -p-config): not found`},
		{name: "flag path is a directory", args: []string{"-p-config", "p.conf.d"},
			wantErr: `config file "p.conf.d" (flag -p-config): is a directory, want a file`},
		{name: "env path is a directory", env: []string{"P_CONFIG", tree.abs("etc")},
			wantErr: `config file "` + tree.abs("etc") + `" (env P_CONFIG): is a directory, want a file`},
		{name: "flag path empty", args: []string{"-p-config", ""}, wantErr: `config file (flag -p-config): empty path`},
		{name: "default in -config-dir is a directory", args: []string{"-config-dir", "isdir"},
			wantErr: `config file "isdir/p.conf" (no -p-config or P_CONFIG given: the default in the directory of flag -config-dir): is a directory`},
		{name: "default in CONFIG_DIR is a directory", env: []string{"CONFIG_DIR", tree.abs("isdir")},
			wantErr: `config file "` + tree.abs("isdir/p.conf") + `" (no -p-config or P_CONFIG given: the default in the directory of env CONFIG_DIR): is a directory`},
		{name: "default in the working directory is a directory", plugin: "w",
			wantErr: `config file "w.conf" (no -w-config or W_CONFIG given: the default in the working directory): is a directory, want a file`},
		{name: "default is a dangling symbolic link", args: []string{"-config-dir", "link"},
			wantErr: `config file "link/p.conf" (no -p-config or P_CONFIG given: the default in the directory of flag -config-dir): a symbolic link to a missing file`},
		{name: "flag path cannot be read", args: []string{"-p-config", "/proc/self/mem"},
			wantErr: `config file "/proc/self/mem" (flag -p-config): cannot be read`},
		{name: "default cannot be read", env: []string{"CONFIG_DIR", "unreadable"},
			wantErr: `config file "unreadable/p.conf" (no -p-config or P_CONFIG given: the default in the directory of env CONFIG_DIR): cannot be read`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			plugin := tc.plugin
			if plugin == "" {
				plugin = "p"
			}
			c := config.ForPlugin(plugin, env(tc.env...))
			parsed(t, c, tc.args...)
			var s sample
			found, err := c.LoadValue(&s)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				g.Expect(found).To(BeFalse())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(found).To(Equal(tc.count != 0))
			g.Expect(s.Count).To(Equal(tc.count))
			if tc.count == 0 {
				g.Expect(c.GetConfigName()).To(BeEmpty())
			} else {
				g.Expect(c.GetConfigName()).NotTo(BeEmpty())
			}
		})
	}
}

// WithPath names a file that must exist, as given.
func TestWithPath(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	t.Chdir(dir)
	p := write(t, dir, "x.conf", "count: 3\n")
	var s sample
	found, err := config.ForPlugin("x", config.WithPath(p), env()).LoadValue(&s)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue())
	g.Expect(s.Count).To(Equal(3))

	_, err = config.ForPlugin("x", config.WithPath("gone.conf"), env()).LoadValue(&s)
	g.Expect(err).To(MatchError(`config file "gone.conf" (WithPath): not found`))
	_, err = config.ForPlugin("x", config.WithPath(dir), env()).LoadValue(&s)
	g.Expect(err).To(MatchError(ContainSubstring("is a directory")))
}
