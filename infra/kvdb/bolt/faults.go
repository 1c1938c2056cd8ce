//go:build faults

package bolt

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// stallsBegun counts the stalls begun in this process (for tests).
var stallsBegun atomic.Uint64

// FaultsBuild tells whether this binary was built with the faults tag.
const FaultsBuild = true

// faultHook returns the commit hook that StallEnv asks for, nil when it
// is unset. With the faults build tag (tests/testenv builds the agent
// so), a process test can stall the real committer: each commit, with
// probability P, first sleeps a random time in [MIN, MAX]; its requests
// are taken (their outcome is the commit's, unknown to a caller whose
// context ends meanwhile) and those queued behind it wait (withdrawn when
// their context ends). Each stall is logged at warn level.
func (p *Plugin) faultHook() (func(int), error) {
	spec, ok := p.env(StallEnv)
	if !ok || spec == "" {
		return nil, nil
	}
	prob, lo, hi, err := parseStall(spec)
	if err != nil {
		return nil, err
	}
	log := p.Log
	return func(requests int) {
		if rand.Float64() >= prob {
			return
		}
		d := lo + time.Duration(rand.Int64N(int64(hi-lo)+1))
		log.Warn("fault injection: commit stalled", "requests", requests, "stall", d)
		stallsBegun.Add(1)
		time.Sleep(d)
	}, nil
}

// parseStall parses "P,MIN,MAX" (0 < P <= 1, 0 <= MIN <= MAX).
func parseStall(spec string) (prob float64, lo, hi time.Duration, err error) {
	parts := strings.Split(spec, ",")
	if len(parts) != 3 {
		return 0, 0, 0, fmt.Errorf("%s=%q: want P,MIN,MAX (0.05,300ms,900ms)", StallEnv, spec)
	}
	prob, err = strconv.ParseFloat(parts[0], 64)
	if err != nil || prob <= 0 || prob > 1 {
		return 0, 0, 0, fmt.Errorf("%s=%q: probability %q: want a number in (0, 1]", StallEnv, spec, parts[0])
	}
	if lo, err = time.ParseDuration(parts[1]); err == nil {
		hi, err = time.ParseDuration(parts[2])
	}
	if err != nil || lo < 0 || hi < lo {
		return 0, 0, 0, fmt.Errorf("%s=%q: want durations with 0 <= MIN <= MAX", StallEnv, spec)
	}
	return prob, lo, hi, nil
}
