package etcd

import "path/filepath"

// logStoreInUse says at start which etcd the agent uses: its endpoints,
// whether it is the embedded server (and then its data directory, as an
// absolute path) or an external cluster (and whether over TLS).
func (p *Plugin) logStoreInUse() {
	if p.cfg.Embedded {
		dir, err := filepath.Abs(p.cfg.EmbeddedDataDir)
		if err != nil {
			dir = p.cfg.EmbeddedDataDir
		}
		p.Log.Info("using etcd: embedded server, private to this agent", "embedded", true,
			"endpoints", p.cfg.Endpoints, "data-dir", dir)
		return
	}
	p.Log.Info("using etcd: external cluster", "embedded", false, "endpoints", p.cfg.Endpoints,
		"tls", p.cfg.usesTLS())
}
