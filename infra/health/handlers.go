package health

import (
	"net/http"

	"github.com/contiv-ipam/agent/infra/rest"
)

// REST paths served by the plugin.
const (
	LivenessPath  = "/liveness"
	ReadinessPath = "/readiness"
)

func (p *Plugin) registerHandlers() {
	rest.RegisterDescribed(p.HTTP, LivenessPath, "200 while the agent is ok or starting, 503 on error",
		p.probeHandler(func(s State) bool { return s == OK || s == Init }), http.MethodGet)
	rest.RegisterDescribed(p.HTTP, ReadinessPath, "200 when the agent is ok, 503 otherwise",
		p.probeHandler(func(s State) bool { return s == OK }), http.MethodGet)
}

// probeHandler answers with the agent status: 200 when healthy(state),
// 503 otherwise.
func (p *Plugin) probeHandler(healthy func(State) bool) rest.HandlerProvider {
	return func(f *rest.Formatter) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			s := p.GetAgentStatus()
			code := http.StatusOK
			if !healthy(s.State) {
				code = http.StatusServiceUnavailable
			}
			f.JSON(w, code, s)
		}
	}
}
