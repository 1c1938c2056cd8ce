package controller

import (
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/config"
)

func TestSampleConfigIsTheDefaults(t *testing.T) {
	g := NewWithT(t)
	data, err := os.ReadFile("controller.conf")
	g.Expect(err).NotTo(HaveOccurred())
	var c Config
	g.Expect(config.Decode(data, &c, "controller.conf")).To(Succeed())
	g.Expect(c).To(Equal(DefaultConfig()))
	g.Expect(c.Validate()).To(Succeed())
}

func TestConfigErrorsNameTheKey(t *testing.T) {
	cases := map[string]struct {
		mod  func(*Config)
		want string
	}{
		"deadline":  {func(c *Config) { c.StartupResyncDeadline = 0 }, "startupResyncDeadline 0s"},
		"healing":   {func(c *Config) { c.DelayAfterErrorHealing = -time.Second }, "delayAfterErrorHealing -1s"},
		"periodic":  {func(c *Config) { c.EnablePeriodicHealing = true; c.PeriodicHealingInterval = 0 }, "periodicHealingInterval 0s"},
		"retries":   {func(c *Config) { c.MaxRetryAttempts = 0 }, "maxRetryAttempts 0"},
		"queue":     {func(c *Config) { c.EventQueueSize = 0 }, "eventQueueSize 0"},
		"history":   {func(c *Config) { c.MaxHistoryRecords = 0 }, "maxHistoryRecords 0"},
		"initial":   {func(c *Config) { c.PermanentlyRecordedInitPeriod = -1 }, "permanentlyRecordedInitPeriod"},
		"local":     {func(c *Config) { c.DelayLocalResync = 0 }, "delayLocalResync 0s"},
		"age limit": {func(c *Config) { c.EventHistoryAgeLimit = 0 }, "eventHistoryAgeLimit 0s"},
		"max limit": {func(c *Config) { c.EventHistoryMaxLimit = 0 }, "eventHistoryMaxLimit 0"},
		"default limit": {func(c *Config) { c.EventHistoryDefaultLimit = 2000 },
			"eventHistoryDefaultLimit 2000: want 1..eventHistoryMaxLimit (1000)"},
		"reads":      {func(c *Config) { c.EventHistoryMaxConcurrentReads = 0 }, "eventHistoryMaxConcurrentReads 0"},
		"stuck":      {func(c *Config) { c.StuckEventTimeout = 0 }, "stuckEventTimeout 0s"},
		"pod layout": {func(c *Config) { c.PodLayout = "nodes" }, `podLayout "nodes": want "node" or "cluster"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := DefaultConfig()
			tc.mod(&c)
			NewWithT(t).Expect(c.Validate()).To(MatchError(ContainSubstring(tc.want)))
		})
	}
}

func TestUnknownKeyAndNanosecondsAreRejected(t *testing.T) {
	g := NewWithT(t)
	c := DefaultConfig()
	g.Expect(config.Decode([]byte("delayRetry: 1s\nenableRetrys: true\n"), &c, "controller.conf")).
		To(MatchError(ContainSubstring(`unknown key "enableRetrys"`)))
	c = DefaultConfig()
	g.Expect(config.Decode([]byte("delayRetry: 1000000000\n"), &c, "controller.conf")).
		To(MatchError(ContainSubstring("delayRetry")), "durations are strings such as 1s")
}
