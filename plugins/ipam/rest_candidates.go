package ipam

import (
	"net/http"
	"time"

	"github.com/contiv-ipam/agent/infra/rest"
)

// CandidatesPath lists the release candidates.
const CandidatesPath = "/contiv/v1/ipam/release-candidates"

// ReleaseCandidates is the reply of GET /contiv/v1/ipam/release-candidates:
// the held pods that the Kubernetes state lacks, soonest first. Each is
// released at releaseAt only if a look then still misses it; running is
// false while the grace periods are paused (the Kubernetes state comes
// from the local mirror, etcd being unreachable).
type ReleaseCandidates struct {
	Running bool `json:"running"`
	// Blocked says why nothing is released by absence now ("" while
	// Running): no fresh contiv-ksr mirror marker, a state emptier than
	// it, or a state that is the local copy.
	Blocked     string             `json:"blocked,omitempty"`
	GracePeriod string             `json:"gracePeriod"`
	Candidates  []ReleaseCandidate `json:"candidates"`
}

// ReleaseCandidate is one pod of ReleaseCandidates.
type ReleaseCandidate struct {
	Pod string `json:"pod"` // namespace/name
	// UID is the pod's UID (K8S_POD_UID of its ADD) when its addresses
	// share one.
	UID          string   `json:"uid,omitempty"`
	IPs          []string `json:"ips"`
	MissingSince string   `json:"missingSince"` // RFC 3339, UTC
	ReleaseAt    string   `json:"releaseAt"`
	// SandboxLives: the container runtime's last list (criSocket) has a
	// sandbox of it; it is kept until a newer list lacks it.
	SandboxLives bool `json:"sandboxLives,omitempty"`
}

func (p *Plugin) registerCandidatesHandler() {
	rest.RegisterDescribed(p.HTTP, CandidatesPath,
		"pods holding addresses that the Kubernetes state lacks: released at releaseAt only if still missing then",
		p.candidatesHandler, http.MethodGet)
}

func (p *Plugin) candidatesHandler(f *rest.Formatter) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		cands, blocked := p.keeper.Candidates()
		out := ReleaseCandidates{Running: blocked == "", Blocked: blocked, GracePeriod: p.cfg.AbsentPodGracePeriod.String(),
			Candidates: make([]ReleaseCandidate, 0, len(cands))}
		for _, c := range cands {
			rc := ReleaseCandidate{Pod: c.Pod.String(), UID: c.UID, IPs: []string{},
				MissingSince: c.MissingSince.UTC().Format(time.RFC3339), ReleaseAt: c.ReleaseAt.UTC().Format(time.RFC3339),
				SandboxLives: c.SandboxLives}
			for _, a := range c.Addrs {
				rc.IPs = append(rc.IPs, a.String())
			}
			out.Candidates = append(out.Candidates, rc)
		}
		f.JSON(w, http.StatusOK, out)
	}
}
