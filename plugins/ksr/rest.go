package ksr

import (
	"errors"
	"net/http"

	"github.com/contiv-ipam/agent/infra/rest"
)

// REST paths of the plugin.
const (
	// StatusPath answers the replica's Status (GET).
	StatusPath = "/contiv/v1/ksr"
	// ResyncPath asks the leader for a resync now (POST); 202 on the
	// leader, 409 on a standby.
	ResyncPath = "/contiv/v1/ksr/resync"
)

// registerHandlers adds the plugin's endpoints to the REST plugin.
func (p *Plugin) registerHandlers() {
	if p.HTTP == nil {
		return
	}
	rest.RegisterDescribed(p.HTTP, StatusPath,
		"contiv-ksr: leadership, last resync (keys fixed, keys mirrored) and node IDs waiting to be freed",
		p.statusHandler, http.MethodGet)
	rest.RegisterDescribed(p.HTTP, ResyncPath,
		"contiv-ksr: resync etcd against the API now (leader only)", p.resyncHandler, http.MethodPost)
	p.registerClusterPage()
}

func (p *Plugin) statusHandler(f *rest.Formatter) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s := p.status.get()
		s.Identity = string(p.identity)
		s.NodeIPAM = p.ipamStatus()
		if v, found, err := p.Election.Leader(r.Context(), p.cfg.ElectionPrefix); err == nil && found {
			s.Leader = string(v)
		}
		f.JSON(w, http.StatusOK, s)
	}
}

func (p *Plugin) resyncHandler(f *rest.Formatter) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if !p.status.get().Leading {
			f.Error(w, http.StatusConflict, errors.New("this replica does not lead; ask the leader (GET "+StatusPath+" names it)"))
			return
		}
		select {
		case p.resyncNow <- struct{}{}:
		default: // one is already pending
		}
		f.JSON(w, http.StatusAccepted, map[string]string{"resync": "requested"})
	}
}
