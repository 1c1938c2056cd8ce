package kvdb

import (
	"context"
	"fmt"
	"time"
)

// ElectionStore is implemented by stores that can elect one leader among
// several candidates (the etcd plugin, on etcd's election recipe). Only
// the leader should write what the election guards, and it proves it on
// every write: Fence is a compare that holds for exactly as long as the
// leadership does, so a write made in one transaction with it can never
// land after another candidate has taken over.
type ElectionStore interface {
	// Campaign blocks until the caller leads the election named by prefix
	// (a full key, no view prefix), ctx ends (ctx.Err()) or the store
	// closes (ErrClosed). value names the candidate (Leader returns it).
	// The leadership lives on a lease of ttl (at least MinPresenceTTL):
	// a leader that dies loses it at most ttl later, and the next
	// candidate in line takes over then.
	Campaign(ctx context.Context, prefix string, value []byte, ttl time.Duration) (Leadership, error)
	// Leader returns the value of the current leader of prefix; found is
	// false when nobody leads.
	Leader(ctx context.Context, prefix string) (value []byte, found bool, err error)
}

// Leadership is one won election. Its methods are safe for concurrent
// use.
type Leadership interface {
	// Fence is true while this leadership holds; put it into every Txn
	// that only the leader may make (it compares the leader key's mod
	// revision, so it is false once the key expired, was deleted or is
	// held by another candidate).
	Fence() Cmp
	// Done is closed once the leadership is lost: the lease expired or
	// could not be kept alive, the leader key was deleted, Resign was
	// called or the store closed. A lost leadership never comes back:
	// campaign again.
	Done() <-chan struct{}
	// Resign hands the lead to the next candidate at once and releases
	// the lease; Done closes. Resigning twice is a no-op.
	Resign(ctx context.Context) error
}

// CheckCampaign checks the arguments of Campaign.
func CheckCampaign(prefix string, value []byte, ttl time.Duration) error {
	if err := CheckKey(prefix); err != nil {
		return fmt.Errorf("election %q: %w", prefix, err)
	}
	if len(value) == 0 {
		return fmt.Errorf("election %q: empty candidate value", prefix)
	}
	if ttl < MinPresenceTTL {
		return fmt.Errorf("election %q: ttl %s, want at least %s", prefix, ttl, MinPresenceTTL)
	}
	return nil
}
