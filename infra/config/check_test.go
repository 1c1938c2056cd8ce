package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/config"
)

func TestCheckRefusesWhatCannotBeDecoded(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name, body, want string
	}{
		{"broken YAML", "count: [\n", "invalid YAML"},
		{"duplicate key", "count: 1\ncount: 2\n", "count"},
		{"not a mapping", "- a\n", "top level must be a mapping"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			p := write(t, dir, "c.conf", tc.body)
			err := config.ForPlugin("c", config.WithPath(p), env()).Check()
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
			g.Expect(err).To(MatchError(ContainSubstring(p)), "the error names the file")
		})
	}
}

// An unknown key is the plugin's to find (Check does not know the type).
func TestCheckLeavesKeysToTheDecoder(t *testing.T) {
	g := NewWithT(t)
	p := write(t, t.TempDir(), "c.conf", "bogus: 1\n")
	c := config.ForPlugin("c", config.WithPath(p), env())
	g.Expect(c.Check()).To(Succeed())
	var s sample
	_, err := c.LoadValue(&s)
	g.Expect(err).To(MatchError(ContainSubstring(`unknown key "bogus"`)))
}

func TestCheckFindsLookupErrorsAndMissingDefaults(t *testing.T) {
	g := NewWithT(t)
	t.Chdir(t.TempDir())
	c := config.ForPlugin("c", env())
	parsed(t, c, "-config-dir", "nope")
	g.Expect(c.Check()).To(MatchError(`config directory "nope" (flag -config-dir): does not exist`))

	c = config.ForPlugin("absent", env())
	parsed(t, c)
	g.Expect(c.Check()).To(Succeed(), "no default file: the defaults")
	var s sample
	found, err := c.LoadValue(&s)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeFalse())
}

// LoadValue after Check decodes the bytes Check read: what was checked is
// what is used, and a file that can be read once (a pipe) is read once.
func TestLoadValueUsesWhatCheckRead(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	p := write(t, dir, "c.conf", "count: 1\n")
	c := config.ForPlugin("c", config.WithPath(p), env())
	g.Expect(c.Check()).To(Succeed())
	write(t, dir, "c.conf", "count: 2\n")
	var s sample
	found, err := c.LoadValue(&s)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue())
	g.Expect(s.Count).To(Equal(1))
	g.Expect(c.GetConfigName()).To(Equal(p))
}

func TestCheckReadsANamedPipeOnce(t *testing.T) {
	g := NewWithT(t)
	fifo := filepath.Join(t.TempDir(), "pipe")
	g.Expect(syscall.Mkfifo(fifo, 0o600)).To(Succeed())
	wrote := make(chan error, 1)
	go func() {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err == nil {
			_, err = f.WriteString("count: 9\n")
			err = errors.Join(err, f.Close())
		}
		wrote <- err
	}()
	c := config.ForPlugin("c", env())
	parsed(t, c, "-c-config", fifo)
	g.Expect(c.Check()).To(Succeed())
	g.Expect(<-wrote).To(Succeed())
	var s sample
	found, err := c.LoadValue(&s)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue())
	g.Expect(s.Count).To(Equal(9))
}

func TestNoFileHasNoFlagAndNothingToCheck(t *testing.T) {
	g := NewWithT(t)
	_, isRegistrar := config.NoFile.(config.FlagRegistrar)
	_, isChecker := config.NoFile.(config.Checker)
	g.Expect(isRegistrar).To(BeFalse(), "NoFile registers no -<name>-config flag")
	g.Expect(isChecker).To(BeFalse())
}
