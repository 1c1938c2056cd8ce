package ipalloc

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error the package returns for one of these
// conditions wraps the sentinel with %w and names the address or offset and
// the prefix, so callers branch with errors.Is and log the message as is.
var (
	// ErrPoolExhausted means that every allocatable address of the pool is taken.
	ErrPoolExhausted = errors.New("pool is full")
	// ErrOutOfRange means that the address or offset is not inside the
	// allocatable window of the pool (outside the prefix, in the ReserveLow
	// or ReserveHigh part, beyond the 2^64 cap, or the pool is the zero
	// Pool).
	ErrOutOfRange = errors.New("address out of range")
	// ErrReserved means that the address is one of Config.Reserved: it is
	// inside the window but never handed out.
	ErrReserved = errors.New("address is reserved")
	// ErrTaken means that the address is already allocated (in a Keyed
	// pool: held by another key, or the key already holds another address).
	ErrTaken = errors.New("address already allocated")
	// ErrNotAllocated means that a released address is not allocated.
	ErrNotAllocated = errors.New("address not allocated")
)

// errReservedRelease is returned by the release of a reserved address: it is
// reserved and, for the caller that releases it, not allocated.
var errReservedRelease = fmt.Errorf("%w (%w)", ErrReserved, ErrNotAllocated)
