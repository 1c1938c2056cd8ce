package ipam

import (
	"errors"
	"fmt"
	"time"

	"github.com/contiv-ipam/agent/infra"
	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/plugins/ipam/keeper"
)

// Config is ipam.conf: how the plugin keeps the pod addresses (see
// keeper.Config for those keys) and how it publishes its status. The
// addressing itself (subnets, prefix lengths) is contiv.conf's ipamConfig.
type Config struct {
	// The keeper's keys are top-level keys of ipam.conf: infra/config
	// (mapstructure) inlines a ",squash" field, encoding/json an
	// anonymous one without a name.
	//lint:ignore SA5008 ",squash" is mapstructure's option, read by infra/config
	keeper.Config `json:",squash"`
	// StatusPublishPeriod is how often the agent writes its status record
	// (package agentstatus: pools, pods, readiness, REST URL) to etcd at
	// agentstatus.Key(node): every period, and within a second of a change
	// of its readiness. 0 turns the record off. A period under a second
	// is published as 1 (readers judge staleness from whole seconds).
	StatusPublishPeriod time.Duration `json:"statusPublishPeriod"`
}

// DefaultStatusPublishPeriod is the default statusPublishPeriod.
const DefaultStatusPublishPeriod = 30 * time.Second

// DefaultConfig returns the defaults of ipam.conf (keeper.DefaultConfig,
// and the status record every 30 s).
func DefaultConfig() Config {
	return Config{Config: keeper.DefaultConfig(), StatusPublishPeriod: DefaultStatusPublishPeriod}
}

// Validate names every bad key and value.
func (c *Config) Validate() error {
	var errs []error
	if err := c.Config.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.StatusPublishPeriod < 0 {
		errs = append(errs, fmt.Errorf("statusPublishPeriod %s: want a duration >= 0 (0: off)", c.StatusPublishPeriod))
	}
	return errors.Join(errs...)
}

var _ infra.ConfigLoader = (*Plugin)(nil)

// LoadConfig decodes and validates ipam.conf before any plugin's Init, so
// that a bad file is refused before anything is created on disk.
func (p *Plugin) LoadConfig() error { return p.loaded.Load(p.decodeConfig) }

// loadConfig returns LoadConfig's config, else decodes it now (without
// the agent's LoadConfig phase, as in unit tests).
func (p *Plugin) loadConfig() (Config, error) { return p.loaded.Get(p.decodeConfig) }

// decodeConfig is the config given with UseConf, else ipam.conf on top of
// the defaults.
func (p *Plugin) decodeConfig() (Config, error) {
	return config.LoadOrFixed(p.Cfg, p.fixedConf, DefaultConfig())
}
