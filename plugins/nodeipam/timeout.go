package nodeipam

import "time"

// Timeout is the resync timing of one node's sync loop: Resync while the
// operations succeed; after an error InitialRetry, doubling with each
// consecutive error up to MaxBackoff; back to Resync after a success.
// The zero value answers 0 until its fields are set. It is not safe for
// concurrent use: each loop owns its own.
type Timeout struct {
	// Resync is the timeout when the last operation succeeded.
	Resync time.Duration
	// MaxBackoff caps the timeout while errors repeat.
	MaxBackoff time.Duration
	// InitialRetry is the timeout after the first error of a run.
	InitialRetry time.Duration

	errs    int           // consecutive errors
	current time.Duration // the backoff reached
}

// Update records the outcome of an operation: ok resets the backoff, an
// error starts it (InitialRetry) or doubles it, capped at MaxBackoff.
func (t *Timeout) Update(ok bool) {
	if ok {
		t.errs, t.current = 0, t.Resync
		return
	}
	t.errs++
	if t.errs == 1 {
		t.current = t.InitialRetry
		return
	}
	t.current = min(2*t.current, t.MaxBackoff)
}

// Next returns the timeout until the next operation.
func (t *Timeout) Next() time.Duration {
	if t.errs == 0 {
		return t.Resync
	}
	return t.current
}
