package etcd

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

// LoadConfig refuses a bad etcd.conf without creating the embedded data
// directory; Init then uses what LoadConfig loaded.
func TestLoadConfigBeforeInit(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "etcd.conf")
	data := filepath.Join(dir, "data")
	g.Expect(os.WriteFile(conf, []byte("embedded: true\nembedded-data-dir: "+data+"\nendpoints: [127.0.0.1:1]\n"), 0o600)).To(Succeed())
	p := NewPlugin(UseEnv(noEnv), UseDeps(func(d *Deps) { d.Cfg = fileConfig(conf); d.Log = testLogger(t) }))
	err := p.LoadConfig()
	g.Expect(err).To(MatchError(ContainSubstring(conf)))
	g.Expect(data).NotTo(BeAnExistingFile(), "nothing created")

	g.Expect(os.WriteFile(conf, []byte("endpoints: [127.0.0.1:1]\ndial-timeout: 250ms\n"), 0o600)).To(Succeed())
	p = NewPlugin(UseEnv(noEnv), UseDeps(func(d *Deps) { d.Cfg = fileConfig(conf); d.Log = testLogger(t) }))
	g.Expect(p.LoadConfig()).To(Succeed())
	g.Expect(os.WriteFile(conf, []byte("bogus: 1\n"), 0o600)).To(Succeed())
	cfg, err := p.initConfig()
	g.Expect(err).NotTo(HaveOccurred(), "Init uses what LoadConfig loaded, not the file as it is now")
	g.Expect(cfg.Endpoints).To(Equal([]string{"127.0.0.1:1"}))
	g.Expect(cfg.Embedded).To(BeFalse())
}
