package nodeipam

import (
	"context"
	"net/netip"
	"slices"
	"sync"
)

// Cloud operations, as MemCloud's fault hook names them.
const (
	CloudOpGet = "get" // NodeRanges
	CloudOpSet = "set" // SetNodeRanges
)

// MemCloud is a Cloud in memory (tests, and demos without a cloud). It is
// safe for concurrent use. A fault hook, when set, is asked before every
// call and fails the call with the error it returns.
type MemCloud struct {
	mu     sync.Mutex
	ranges map[string][]netip.Prefix
	fault  func(op, node string) error
	calls  map[string]int // op -> calls, failed ones included
}

var _ Cloud = (*MemCloud)(nil)

// NewMemCloud returns an empty MemCloud.
func NewMemCloud() *MemCloud {
	return &MemCloud{ranges: make(map[string][]netip.Prefix), calls: make(map[string]int)}
}

// SetFault installs fn (nil removes it): every later call first asks
// fn(op, node), op being CloudOpGet or CloudOpSet, and fails with its
// error when it is not nil. fn runs under m's lock: it must not call m.
func (m *MemCloud) SetFault(fn func(op, node string) error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fault = fn
}

// Calls returns how many times op was called, failed calls included.
func (m *MemCloud) Calls(op string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls[op]
}

// NodeRanges implements Cloud; the slice returned is the caller's.
func (m *MemCloud) NodeRanges(_ context.Context, node string) ([]netip.Prefix, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.call(CloudOpGet, node); err != nil {
		return nil, err
	}
	return append([]netip.Prefix{}, m.ranges[node]...), nil
}

// SetNodeRanges implements Cloud; no ranges removes the node.
func (m *MemCloud) SetNodeRanges(_ context.Context, node string, ranges []netip.Prefix) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.call(CloudOpSet, node); err != nil {
		return err
	}
	if len(ranges) == 0 {
		delete(m.ranges, node)
		return nil
	}
	m.ranges[node] = slices.Clone(ranges)
	return nil
}

// call counts the call and asks the fault hook; m.mu is held.
func (m *MemCloud) call(op, node string) error {
	m.calls[op]++
	if m.fault == nil {
		return nil
	}
	return m.fault(op, node)
}
