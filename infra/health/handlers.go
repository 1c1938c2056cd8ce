package health

import (
	"net/http"

	"github.com/contiv-ipam/agent/infra/rest"
)

// REST paths served by the plugin: the REST server's probe paths, which
// it serves without client authentication (rest.ProbePaths).
const (
	LivenessPath  = rest.LivenessPath
	ReadinessPath = rest.ReadinessPath
)

func (p *Plugin) registerHandlers() {
	rest.RegisterDescribed(p.HTTP, LivenessPath,
		"200 while the process works (503 when a liveness plugin, the event loop, is in error; etcd never counts)",
		p.probeHandler(func(s AgentStatus) bool { return s.Live != Error }), http.MethodGet)
	rest.RegisterDescribed(p.HTTP, ReadinessPath, "200 when every fatal plugin (etcd, the event loop, ...) is ok, 503 otherwise",
		p.probeHandler(func(s AgentStatus) bool { return s.State == OK }), http.MethodGet)
}

// probeHandler answers with the agent status: 200 when healthy(status),
// 503 otherwise. A client the REST server let through without the
// authentication it requires elsewhere (rest.Anonymous: the kubelet) gets
// only the two states, not the plugins, their errors or the build.
func (p *Plugin) probeHandler(healthy func(AgentStatus) bool) rest.HandlerProvider {
	return func(f *rest.Formatter) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			s := p.GetAgentStatus()
			code := http.StatusOK
			if !healthy(s) {
				code = http.StatusServiceUnavailable
			}
			if rest.Anonymous(r) {
				f.JSON(w, code, ProbeStatus{State: s.State, Live: s.Live})
				return
			}
			f.JSON(w, code, s)
		}
	}
}
