package api

import (
	"fmt"

	"google.golang.org/protobuf/proto"
)

// DBResync carries the whole Kubernetes state read from etcd (Local false)
// or from the bolt mirror when etcd is unreachable (Local true).
type DBResync struct {
	Local     bool
	KubeState KubeStateData
}

// DBResyncName is the name of DBResync events.
const DBResyncName = "DB Resync"

// GetName returns "DB Resync".
func (ev *DBResync) GetName() string { return DBResyncName }

// String tells the source and the size of the state.
func (ev *DBResync) String() string {
	src := "remote"
	if ev.Local {
		src = "local"
	}
	return fmt.Sprintf("%s (%s DB, %d values)", DBResyncName, src, ev.KubeState.Len())
}

// Method is FullResync.
func (ev *DBResync) Method() EventMethodType { return FullResync }

// IsBlocking is false.
func (ev *DBResync) IsBlocking() bool { return false }

// Done does nothing.
func (ev *DBResync) Done(error) {}

// KubeStateChange is one changed key of the Kubernetes state.
type KubeStateChange struct {
	Key       string // without the KSR prefix
	Resource  string // keyword, e.g. "node"
	PrevValue proto.Message
	NewValue  proto.Message // nil when the key was deleted
}

// KubeStateChangeName is the name of KubeStateChange events.
const KubeStateChangeName = "Kubernetes State Change"

// GetName returns "Kubernetes State Change".
func (ev *KubeStateChange) GetName() string { return KubeStateChangeName }

// String tells the key and the kind of change.
func (ev *KubeStateChange) String() string {
	what := "update"
	switch {
	case ev.PrevValue == nil && ev.NewValue != nil:
		what = "create"
	case ev.NewValue == nil:
		what = "delete"
	}
	return fmt.Sprintf("%s (%s %s %s)", KubeStateChangeName, what, ev.Resource, ev.Key)
}

// Method is Update.
func (ev *KubeStateChange) Method() EventMethodType { return Update }

// TransactionType is BestEffort.
func (ev *KubeStateChange) TransactionType() UpdateTransactionType { return BestEffort }

// Direction is Reverse for a deletion, Forward otherwise.
func (ev *KubeStateChange) Direction() UpdateDirectionType {
	if ev.NewValue == nil {
		return Reverse
	}
	return Forward
}

// IsBlocking is false.
func (ev *KubeStateChange) IsBlocking() bool { return false }

// Done does nothing.
func (ev *KubeStateChange) Done(error) {}

// HealingResyncType tells why a healing resync runs.
type HealingResyncType int

const (
	// Periodic healing re-applies the desired configuration (DownstreamResync).
	Periodic HealingResyncType = iota
	// AfterError healing rebuilds everything (FullResync) after a failed update.
	AfterError
)

// HealingResync repairs the state, periodically or after an error.
type HealingResync struct {
	Type  HealingResyncType
	Error error // what failed, for AfterError
}

// HealingResyncName is the name of HealingResync events.
const HealingResyncName = "Healing Resync"

// GetName returns "Healing Resync".
func (ev *HealingResync) GetName() string { return HealingResyncName }

// String tells the type and, after an error, the error.
func (ev *HealingResync) String() string {
	if ev.Type == Periodic {
		return HealingResyncName + " (periodic)"
	}
	return fmt.Sprintf("%s (after error: %v)", HealingResyncName, ev.Error)
}

// Method is DownstreamResync for periodic healing, FullResync after an error.
func (ev *HealingResync) Method() EventMethodType {
	if ev.Type == Periodic {
		return DownstreamResync
	}
	return FullResync
}

// IsBlocking is false.
func (ev *HealingResync) IsBlocking() bool { return false }

// Done does nothing.
func (ev *HealingResync) Done(error) {}

// Shutdown is the last event: handlers clean up in Update.
type Shutdown struct{}

// ShutdownName is the name of Shutdown events.
const ShutdownName = "Shutdown"

// GetName returns "Shutdown".
func (ev *Shutdown) GetName() string { return ShutdownName }

// String returns "Shutdown".
func (ev *Shutdown) String() string { return ShutdownName }

// Method is Update.
func (ev *Shutdown) Method() EventMethodType { return Update }

// TransactionType is BestEffortIgnoreErrors: nothing heals after shutdown.
func (ev *Shutdown) TransactionType() UpdateTransactionType { return BestEffortIgnoreErrors }

// Direction is Reverse: dependants clean up first.
func (ev *Shutdown) Direction() UpdateDirectionType { return Reverse }

// IsBlocking is true: Close waits for the handlers.
func (ev *Shutdown) IsBlocking() bool { return true }

// Done does nothing.
func (ev *Shutdown) Done(error) {}
