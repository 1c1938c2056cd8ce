package controller

import (
	"github.com/contiv-ipam/agent/plugins/controller/dbresources"
	"github.com/contiv-ipam/agent/plugins/controller/dbwatcher"
)

// newWatcher builds the DB watcher that lists and watches the Kubernetes
// state in RemoteDB, mirrors it into LocalDB and pushes the events. With
// NodeName it reads that node's pods alone in the "node" pod layout (see
// dbresources.WatchPrefixes); without, the whole Kubernetes state.
func (p *Plugin) newWatcher() (stateWatcher, error) {
	var prefixes []string
	if p.NodeName != nil {
		var err error
		if prefixes, err = dbresources.WatchPrefixes(p.NodeName(), p.cfg.PodLayout); err != nil {
			return nil, err
		}
	}
	return dbwatcher.New(dbwatcher.Config{
		Remote:           p.RemoteDB,
		Local:            p.LocalDB,
		Loop:             p,
		Log:              p.Log.With("component", "dbwatcher"),
		DelayLocalResync: p.cfg.DelayLocalResync,
		OnBadValue:       p.metrics.badValue,
		Prefixes:         prefixes,
	})
}
