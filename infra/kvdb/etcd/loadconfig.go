package etcd

import "github.com/contiv-ipam/agent/infra"

var _ infra.ConfigLoader = (*Plugin)(nil)

// LoadConfig decodes, normalises (ETCD_ENDPOINTS) and validates etcd.conf
// before any plugin's Init, so that a bad file (this one or another
// plugin's) is refused before the embedded server's data directory is
// created. It creates nothing itself.
func (p *Plugin) LoadConfig() error {
	cfg, err := p.loadConfig()
	if err != nil {
		return err
	}
	p.loaded = &cfg
	return nil
}

// initConfig is the config Init uses: LoadConfig's, else loaded now (a
// plugin started without the agent's LoadConfig phase).
func (p *Plugin) initConfig() (Config, error) {
	if p.loaded != nil {
		return *p.loaded, nil
	}
	return p.loadConfig()
}
