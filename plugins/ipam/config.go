package ipam

import (
	"github.com/contiv-ipam/agent/infra"
	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/plugins/ipam/keeper"
)

// Config is ipam.conf: how the plugin keeps the pod addresses (see
// keeper.Config for every key). The addressing itself (subnets, prefix
// lengths) is contiv.conf's ipamConfig.
type Config = keeper.Config

// DefaultConfig returns the defaults of ipam.conf (keeper.DefaultConfig).
func DefaultConfig() Config { return keeper.DefaultConfig() }

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
