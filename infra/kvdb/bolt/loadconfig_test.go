package bolt

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

// LoadConfig refuses a bad bolt.conf without creating anything; Init
// opens the database LoadConfig's config names.
func TestLoadConfigBeforeInit(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "bolt.conf")
	bad := filepath.Join(dir, "bad", "bolt.db")
	g.Expect(os.WriteFile(conf, []byte("db-path: "+bad+"\nlock-timout: 1s\n"), 0o600)).To(Succeed())
	p := NewPlugin(UseDeps(func(d *Deps) { d.Cfg = fileConfig(conf); d.Log = testLogger(t) }))
	err := p.LoadConfig()
	g.Expect(err).To(MatchError(ContainSubstring(`unknown key "lock-timout"`)))
	g.Expect(err).To(MatchError(ContainSubstring(conf)))
	g.Expect(filepath.Dir(bad)).NotTo(BeAnExistingFile(), "nothing created")

	first, second := filepath.Join(dir, "first.db"), filepath.Join(dir, "second.db")
	g.Expect(os.WriteFile(conf, []byte("db-path: "+first+"\n"), 0o600)).To(Succeed())
	p = NewPlugin(UseDeps(func(d *Deps) { d.Cfg = fileConfig(conf); d.Log = testLogger(t) }))
	g.Expect(p.LoadConfig()).To(Succeed())
	g.Expect(first).NotTo(BeAnExistingFile(), "LoadConfig creates nothing")
	g.Expect(os.WriteFile(conf, []byte("db-path: "+second+"\n"), 0o600)).To(Succeed())
	g.Expect(p.Init()).To(Succeed())
	t.Cleanup(func() { _ = p.Close() })
	g.Expect(p.Config().DBPath).To(Equal(first), "Init uses what LoadConfig loaded")
	g.Expect(first).To(BeAnExistingFile())
	g.Expect(second).NotTo(BeAnExistingFile())
}
