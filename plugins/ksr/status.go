package ksr

import (
	"sync"
	"time"

	mirrormodel "github.com/contiv-ipam/agent/plugins/ksr/model/mirror"
)

// Status is what GET /contiv/v1/ksr answers.
type Status struct {
	// Identity names this replica in the election (host/pid).
	Identity string `json:"identity"`
	// Leader is the identity of the replica that leads ("" if none).
	Leader string `json:"leader"`
	// Leading is true while this replica leads.
	Leading bool `json:"leading"`
	// Synced is true once the informers have listed the API.
	Synced bool `json:"synced"`
	// LastResync is this replica's last successful resync (nil before).
	LastResync *ResyncStatus `json:"lastResync,omitempty"`
	// PendingNodeIDReleases are the node IDs of Nodes gone from the API,
	// waiting for the grace period (as of the last check while leading).
	PendingNodeIDReleases []PendingRelease `json:"pendingNodeIDReleases"`
	// MirrorMarker is the last mirror marker this replica wrote while
	// leading (absent before the first).
	MirrorMarker *mirrormodel.Marker `json:"mirrorMarker,omitempty"`
	// NodeIPAM is the node pod-CIDR allocator (absent when disabled).
	NodeIPAM *NodeIPAMStatus `json:"nodeIPAM,omitempty"`
}

// ResyncStatus describes one resync.
type ResyncStatus struct {
	At       time.Time      `json:"at"`
	Fixes    Fixes          `json:"fixes"`
	Fixed    int            `json:"fixed"`
	Mirrored map[string]int `json:"mirrored"`
}

// statusBook holds the status; the loop writes it, REST reads a copy.
type statusBook struct {
	mu sync.Mutex
	s  Status
}

func (b *statusBook) setSynced() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.s.Synced = true
}

func (b *statusBook) setLeading(on bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.s.Leading = on
	if !on {
		b.s.PendingNodeIDReleases = nil
	}
}

func (b *statusBook) setResync(at time.Time, fixes Fixes, mirrored map[string]int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.s.LastResync = &ResyncStatus{At: at.UTC(), Fixes: fixes, Fixed: fixes.Total(), Mirrored: mirrored}
}

func (b *statusBook) setMarker(m mirrormodel.Marker) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.s.MirrorMarker = &m
}

func (b *statusBook) setPending(p []PendingRelease) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.s.PendingNodeIDReleases = p
}

// get returns a copy of the status (slices and maps are replaced, never
// changed in place, so sharing them is safe).
func (b *statusBook) get() Status {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.s
	if s.PendingNodeIDReleases == nil {
		s.PendingNodeIDReleases = []PendingRelease{}
	}
	return s
}
