package bolt

import "github.com/contiv-ipam/agent/infra"

var _ infra.ConfigLoader = (*Plugin)(nil)

// LoadConfig decodes and validates bolt.conf before any plugin's Init, so
// that a bad file is refused before anything (the etcd data directory, the
// database file) is created. It creates nothing itself.
func (p *Plugin) LoadConfig() error { return p.loaded.Load(p.loadConfig) }

// initConfig is the config Init uses: LoadConfig's, else loaded now (a
// plugin started without the agent's LoadConfig phase).
func (p *Plugin) initConfig() (Config, error) { return p.loaded.Get(p.loadConfig) }
