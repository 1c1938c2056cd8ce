package ipam_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ipam"
)

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name string
		edit func(c *ipam.Config)
		want string // "" = valid
	}{
		{"defaults", func(*ipam.Config) {}, ""},
		{"no grace period", func(c *ipam.Config) { c.AbsentPodGracePeriod = 0 }, ""},
		{"negative grace period", func(c *ipam.Config) { c.AbsentPodGracePeriod = -time.Second }, "absentPodGracePeriod -1s: want a duration >= 0"},
		{"zero store timeout", func(c *ipam.Config) { c.StoreTimeout = 0 }, "storeTimeout 0s: want a positive duration"},
		{"status record off", func(c *ipam.Config) { c.StatusPublishPeriod = 0 }, ""},
		{"negative status period", func(c *ipam.Config) { c.StatusPublishPeriod = -time.Second }, "statusPublishPeriod -1s: want a duration >= 0"},
		{"both kinds of key", func(c *ipam.Config) { c.StatusPublishPeriod, c.StoreTimeout = -time.Second, 0 }, "storeTimeout 0s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			c := ipam.DefaultConfig()
			tc.edit(&c)
			if tc.want == "" {
				g.Expect(c.Validate()).To(Succeed())
				return
			}
			g.Expect(c.Validate()).To(MatchError(ContainSubstring(tc.want)))
		})
	}
}

// ipam.conf is read at Init: a bad value stops the plugin naming the key,
// an unknown key names the key and the file.
func TestIPAMConfIsLoaded(t *testing.T) {
	cases := []struct{ name, yaml, want string }{
		{"bad value", "absentPodGracePeriod: -5m\n", "absentPodGracePeriod -5m0s"},
		{"unknown key", "absentPodGrace: 5m\n", `unknown key "absentPodGrace"`},
		{"not a duration", "storeTimeout: soon\n", "storeTimeout"},
		{"status period not a duration", "statusPublishPeriod: 30\n", "statusPublishPeriod"},
		{"negative status period", "statusPublishPeriod: -30s\n", "statusPublishPeriod -30s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			path := filepath.Join(t.TempDir(), "ipam.conf")
			g.Expect(os.WriteFile(path, []byte(tc.yaml), 0o600)).To(Succeed())
			conf, err := newContivConf(t, defaultTestConfig)
			g.Expect(err).NotTo(HaveOccurred())
			p := ipam.NewPlugin(ipam.UseDeps(func(d *ipam.Deps) {
				d.Log, d.Cfg = quietLog(), config.ForPlugin("ipam", config.WithPath(path))
				d.ContivConf, d.NodeSync, d.ServiceLabel = conf, &fakeNodeSync{}, fakeLabel{thisNode}
			}))
			err = p.Init()
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
			g.Expect(err).To(MatchError(ContainSubstring(tc.yaml[:5])))
		})
	}
}

func TestIPAMConfGracePeriodTakesEffect(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "ipam.conf")
	g.Expect(os.WriteFile(path, []byte("absentPodGracePeriod: 0s\n"), 0o600)).To(Succeed())
	conf, err := newContivConf(t, defaultTestConfig)
	g.Expect(err).NotTo(HaveOccurred())
	ns := &fakeNodeSync{}
	ns.id.Store(1)
	p := ipam.NewPlugin(ipam.UseDeps(func(d *ipam.Deps) {
		d.Log, d.Cfg = quietLog(), config.ForPlugin("ipam", config.WithPath(path))
		d.ContivConf, d.NodeSync, d.ServiceLabel = conf, ns, fakeLabel{thisNode}
	}))
	g.Expect(p.Init()).To(Succeed())
	g.Expect(p.AfterInit()).To(Succeed())
	defer p.Close()
	ks := kubePods(bystander)
	g.Expect(p.Resync(&api.DBResync{KubeState: ks}, ks, 1, nil)).To(Succeed())
	_, err = p.AllocatePodIP(pod1, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	(&beater{p: p}).beat(t)
	g.Eventually(func() bool { return p.GetPodIP(pod1) == nil }).WithTimeout(10*time.Second).Should(BeTrue(),
		"with no grace period, a pod Kubernetes does not have loses its address at once")
}

// statusPublishPeriod is read from ipam.conf next to the keeper's keys,
// and defaults to 30 s.
func TestStatusPublishPeriodDecodes(t *testing.T) {
	g := NewWithT(t)
	c := ipam.DefaultConfig()
	g.Expect(c.StatusPublishPeriod).To(Equal(30 * time.Second))
	g.Expect(config.Decode([]byte("statusPublishPeriod: 5s\nstoreTimeout: 3s\n"), &c, "ipam.conf")).To(Succeed())
	g.Expect(c.StatusPublishPeriod).To(Equal(5 * time.Second))
	g.Expect(c.StoreTimeout).To(Equal(3 * time.Second))
	g.Expect(config.Decode([]byte("statusPublishPeriod: 0\n"), &c, "ipam.conf")).To(Succeed())
	g.Expect(c.StatusPublishPeriod).To(BeZero())
	g.Expect(config.Decode([]byte("Config: {}\n"), &c, "ipam.conf")).To(MatchError(ContainSubstring(`unknown key "Config"`)),
		"the embedded keeper config has no key of its own")
}
