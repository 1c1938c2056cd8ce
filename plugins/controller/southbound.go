package controller

import (
	"context"
	"maps"
	"sync"

	"google.golang.org/protobuf/proto"
)

// Commit is one transaction handed to the southbound.
type Commit struct {
	// Resync: Values is the whole desired configuration; everything else
	// is removed. Otherwise Values are changes, nil meaning delete.
	Resync bool
	Values map[string]proto.Message
	// Revert asks the southbound to undo what it applied of this commit if
	// it fails part way (RevertOnFailure events).
	Revert bool
	// SeqNum and Event identify the event, for logs.
	SeqNum uint64
	Event  string
}

// Southbound receives the desired configuration the handlers compute. In
// Contiv it is the VPP-agent's KVScheduler; here there is no dataplane,
// and the default keeps the configuration in memory.
type Southbound interface {
	// Commit applies c, atomically or not at all when c.Revert is set.
	Commit(ctx context.Context, c Commit) error
	// Dump returns the configuration the southbound holds.
	Dump() map[string]proto.Message
}

// MemSouthbound keeps the committed configuration in memory.
type MemSouthbound struct {
	mu     sync.RWMutex
	values map[string]proto.Message
}

// NewMemSouthbound returns an empty in-memory southbound.
func NewMemSouthbound() *MemSouthbound {
	return &MemSouthbound{values: map[string]proto.Message{}}
}

// Commit applies c atomically.
func (m *MemSouthbound) Commit(_ context.Context, c Commit) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c.Resync {
		m.values = make(map[string]proto.Message, len(c.Values))
	}
	for k, v := range c.Values {
		if v == nil {
			delete(m.values, k)
			continue
		}
		m.values[k] = v
	}
	return nil
}

// Dump returns a copy of the configuration.
func (m *MemSouthbound) Dump() map[string]proto.Message {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return maps.Clone(m.values)
}
