package ipam

import (
	"sync"

	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// cniErrorsLen is how many failed CNI calls the status page lists.
const cniErrorsLen = 20

// cniErrors keeps the last cniErrorsLen failed CNI ADDs and DELs, a ring
// written by podmanager's call goroutines (CNIFailed) and read by the
// status page; its own mutex guards it.
type cniErrors struct {
	mu   sync.Mutex
	ring [cniErrorsLen]podmanager.CNIFailure
	next int // the slot of the next failure
	n    int // failures kept, at most cniErrorsLen
}

func (c *cniErrors) add(f podmanager.CNIFailure) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ring[c.next] = f
	c.next = (c.next + 1) % cniErrorsLen
	c.n = min(c.n+1, cniErrorsLen)
}

// latest appends the kept failures to out, newest first.
func (c *cniErrors) latest(out []podmanager.CNIFailure) []podmanager.CNIFailure {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := 1; i <= c.n; i++ {
		out = append(out, c.ring[(c.next-i+cniErrorsLen)%cniErrorsLen])
	}
	return out
}

var _ podmanager.FailureObserver = (*Plugin)(nil)

// CNIFailed implements podmanager.FailureObserver: the status page lists
// the last failures (nothing is kept without the REST server).
func (p *Plugin) CNIFailed(f podmanager.CNIFailure) {
	if p.page != nil {
		p.page.errors.add(f)
	}
}
