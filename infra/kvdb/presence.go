package kvdb

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrPresenceHeld is wrapped by ClaimPresence when the key holds another
// holder's value; the error is a *PresenceHeldError.
var ErrPresenceHeld = errors.New("kvdb: presence held by another holder")

// PresenceStore is implemented by stores with leases (the etcd plugin; not
// bolt, whose keys cannot expire). It is separate from Broker on purpose:
// only a caller that must detect a second live instance of itself needs it.
type PresenceStore interface {
	// ClaimPresence stores value under key (a full key, no view prefix),
	// bound to a new lease of ttl (at least 1s, rounded up to whole
	// seconds) that this client keeps alive until Release or until the
	// lease is lost. It succeeds when key is absent, or when key holds
	// exactly value: that is this holder's own earlier presence whose lease
	// it no longer keeps alive (a keep-alive gap), and the key is moved to
	// the new lease. When key holds any other value, nothing is written and
	// the error is a *PresenceHeldError (wrapping ErrPresenceHeld). Other
	// errors (store unreachable, ErrInvalidKey, ErrValueTooLarge, ErrClosed,
	// a ttl below 1s) wrap the key.
	ClaimPresence(ctx context.Context, key string, value []byte, ttl time.Duration) (Presence, error)

	// TakeOverPresence is ClaimPresence that also takes key from a holder
	// the caller knows to be dead: when key is still at mod revision rev
	// (the Revision of the *PresenceHeldError that named that holder), it
	// is overwritten with value, bound to the new lease, in one
	// transaction that compares that revision. A key written since (by
	// anyone; deleted and created again counts) is never overwritten:
	// absent, it is created; holding value, it is moved as in
	// ClaimPresence; holding any other value, nothing is written and the
	// error is a *PresenceHeldError naming the current holder and its
	// revision. The dead holder's lease is left to expire: the key is no
	// longer bound to it. Errors otherwise as ClaimPresence. The caller
	// alone decides that the holder is dead; the store cannot tell.
	TakeOverPresence(ctx context.Context, key string, value []byte, ttl time.Duration, rev int64) (Presence, error)
}

// Presence is a key that exists while its holder keeps its lease alive.
// Safe for concurrent use.
type Presence interface {
	// Key returns the presence key.
	Key() string
	// Lost is closed once the lease can no longer be trusted to hold the
	// key: it expired, was revoked, no keep-alive answer came for one TTL
	// (store unreachable), Release was called or the store was closed. The
	// key may be gone or held by someone else: claim again.
	Lost() <-chan struct{}
	// Release stops the keep-alive and revokes the lease, which deletes the
	// key if it is still bound to it. Only the first call does anything; if
	// its revoke fails (store unreachable), the key lives until the TTL
	// ends.
	Release(ctx context.Context) error
}

// PresenceHeldError tells who holds a presence key.
type PresenceHeldError struct {
	// Key is the presence key.
	Key string
	// Holder is the value stored by the current holder.
	Holder []byte
	// Revision is the key's mod revision as read: the revision
	// TakeOverPresence compares.
	Revision int64
	// TTL is what remains of the holder's lease: the key vanishes after it
	// unless the holder keeps the lease alive. Negative when the key is
	// bound to no lease (it never expires).
	TTL time.Duration
}

// Error names the key, the holder and the remaining TTL.
func (e *PresenceHeldError) Error() string {
	ttl := "no lease: never expires"
	if e.TTL >= 0 {
		ttl = "lease expires in " + e.TTL.String() + " unless kept alive"
	}
	return fmt.Sprintf("%v: key %q holds %q (%s)", ErrPresenceHeld, e.Key, e.Holder, ttl)
}

// Unwrap returns ErrPresenceHeld.
func (e *PresenceHeldError) Unwrap() error { return ErrPresenceHeld }

// MinPresenceTTL is the shortest lease ClaimPresence accepts.
const MinPresenceTTL = time.Second

// CheckPresence checks the arguments of ClaimPresence.
func CheckPresence(key string, value []byte, ttl time.Duration) error {
	if err := CheckPut(key, value); err != nil {
		return err
	}
	if ttl < MinPresenceTTL {
		return fmt.Errorf("presence %q: ttl %s, want at least %s", key, ttl, MinPresenceTTL)
	}
	return nil
}
