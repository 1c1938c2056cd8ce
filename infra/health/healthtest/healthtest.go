// Package healthtest has a health.Reporter for tests: it records the
// states a plugin reports.
package healthtest

import (
	"sync"

	"github.com/contiv-ipam/agent/infra/health"
)

// Recorder records every reported state; safe for concurrent use.
type Recorder struct {
	mu     sync.Mutex
	states []health.State
	errs   []string
}

var _ health.Reporter = (*Recorder)(nil)

// Register does nothing.
func (r *Recorder) Register(string, health.Probe) {}

// ReportStateChange records the state and the error's text ("" for nil).
func (r *Recorder) ReportStateChange(_ string, s health.State, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	r.states, r.errs = append(r.states, s), append(r.errs, msg)
}

// Last returns the last reported state and its error text; Init and ""
// before any report.
func (r *Recorder) Last() (health.State, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.states) == 0 {
		return health.Init, ""
	}
	return r.states[len(r.states)-1], r.errs[len(r.errs)-1]
}
