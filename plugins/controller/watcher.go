package controller

import "github.com/contiv-ipam/agent/plugins/controller/dbwatcher"

// newWatcher builds the DB watcher that lists and watches the Kubernetes
// state in RemoteDB, mirrors it into LocalDB and pushes the events.
func (p *Plugin) newWatcher() (stateWatcher, error) {
	return dbwatcher.New(dbwatcher.Config{
		Remote:           p.RemoteDB,
		Local:            p.LocalDB,
		Loop:             p,
		Log:              p.Log.With("component", "dbwatcher"),
		DelayLocalResync: p.cfg.DelayLocalResync,
		OnBadValue:       p.metrics.badValue,
	})
}
