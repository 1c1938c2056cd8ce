package health

import (
	"fmt"
	"time"
)

// State is a plugin's (or the agent's) health.
type State int

// States, ordered from best to worst so that the agent state is the maximum.
const (
	// OK: working.
	OK State = iota
	// Init: starting, not ready yet.
	Init
	// Error: failing.
	Error
)

// String returns "ok", "init" or "error".
func (s State) String() string {
	switch s {
	case OK:
		return "ok"
	case Init:
		return "init"
	case Error:
		return "error"
	}
	return "unknown"
}

// MarshalText makes State print as its name in JSON.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText parses "ok", "init" or "error", so that clients can decode
// the JSON status.
func (s *State) UnmarshalText(text []byte) error {
	for _, st := range []State{OK, Init, Error} {
		if string(text) == st.String() {
			*s = st
			return nil
		}
	}
	return fmt.Errorf("unknown health state %q (want ok, init or error)", text)
}

// Probe reports a plugin's current state when polled.
type Probe func() (State, error)

// Reporter is what plugins use to report their health.
type Reporter interface {
	// Register adds a plugin in state Init. probe may be nil; when set it is
	// polled periodically and its result replaces the reported state.
	Register(pluginName string, probe Probe)
	// ReportStateChange sets the plugin's state; err explains an Error state.
	ReportStateChange(pluginName string, state State, err error)
}

// LivenessReporter is a Reporter whose plugins can take part in liveness.
// The health plugin implements it; a plugin finds it by type assertion on
// its Reporter.
type LivenessReporter interface {
	Reporter
	// RegisterLiveness is Register for a plugin whose Error state means the
	// process itself is broken (the event loop died or is stuck): it fails
	// GET /liveness as well as GET /readiness, and Kubernetes restarts the
	// agent. A dependency that can come back on its own (etcd) must use
	// Register: restarting every agent of the cluster when etcd is down
	// would not bring it back.
	RegisterLiveness(pluginName string, probe Probe)
}

// PluginStatus is the last known state of one plugin.
type PluginStatus struct {
	Name  string `json:"name"`
	State State  `json:"state"`
	// Liveness is set for plugins registered with RegisterLiveness: their
	// Error state also fails GET /liveness.
	Liveness   bool      `json:"liveness,omitempty"`
	Error      string    `json:"error,omitempty"`
	LastChange time.Time `json:"lastChange"`
	LastUpdate time.Time `json:"lastUpdate"`
}

// AgentStatus is the agent's state: the worst state of its fatal plugins.
type AgentStatus struct {
	// State is the readiness: the worst state of the fatal plugins.
	State State `json:"state"`
	// Live is the liveness: error when a fatal liveness plugin is in
	// error, else ok.
	Live       State          `json:"live"`
	BuildInfo  BuildInfo      `json:"build"`
	StartTime  time.Time      `json:"startTime"`
	LastChange time.Time      `json:"lastChange"`
	LastUpdate time.Time      `json:"lastUpdate"`
	Plugins    []PluginStatus `json:"plugins"`
	NonFatal   []string       `json:"nonFatalPlugins,omitempty"`
}

// ProbeStatus is the body of GET /liveness and /readiness for a client
// that the REST server serves without authentication while it requires
// authentication elsewhere (rest.Anonymous): the readiness and the
// liveness of AgentStatus, nothing else.
type ProbeStatus struct {
	State State `json:"state"`
	Live  State `json:"live"`
}

// BuildInfo describes the running binary.
type BuildInfo struct {
	Version string `json:"version"`
	Date    string `json:"date,omitempty"`
	Commit  string `json:"commit,omitempty"`
}

// StatusReader is what the probes read.
type StatusReader interface {
	GetAgentStatus() AgentStatus
	GetAllPluginStatus() []PluginStatus
}
