package ipam

import (
	"net/http"

	"github.com/contiv-ipam/agent/infra/rest"
)

// PoolsPath is the REST path of the address stats of this node's pools.
const PoolsPath = "/contiv/v1/ipam/pools"

func (p *Plugin) registerPoolsHandler() {
	rest.RegisterDescribed(p.HTTP, PoolsPath,
		"the addresses of each pod subnet of this node, and their sums: total, assigned, cooling down, excluded, free (the AWS datastore's GetStats)",
		p.poolsHandler, http.MethodGet)
}

func (p *Plugin) poolsHandler(f *rest.Formatter) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if !p.ready() {
			f.Error(w, http.StatusServiceUnavailable, p.notReady())
			return
		}
		stats, err := p.Stats()
		if err != nil {
			f.Error(w, http.StatusServiceUnavailable, err)
			return
		}
		f.JSON(w, http.StatusOK, stats)
	}
}
