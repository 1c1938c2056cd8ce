package dbwatcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/plugins/controller/api"
)

// Defaults filled in by New for zero fields.
const (
	// DefaultRetryInterval is the wait before a failed resync or a refused
	// push is retried.
	DefaultRetryInterval = time.Second
	// DefaultMirrorPrefix is where the mirror of the Kubernetes state lives
	// in the local store.
	DefaultMirrorPrefix = "/contiv-agent/kube-state/"
)

// Loop is the event loop the watcher feeds (the controller).
type Loop interface {
	// PushEventWait queues event behind the events already queued. While
	// the queue is full it waits for room until ctx ends (an error wrapping
	// ctx.Err()) or the loop closes (api.ErrClosedController): it never
	// drops the event.
	PushEventWait(ctx context.Context, event api.Event) error
}

// Config is what a Watcher needs. Remote and Loop are required; every
// other field has a usable zero value.
type Config struct {
	// Remote is etcd, where contiv-ksr writes the Kubernetes state under
	// codec.KSRPrefix.
	Remote kvdb.Store
	// Local is bolt, which keeps the mirror; nil means no mirror and no
	// local fallback.
	Local kvdb.Store
	// Loop receives the events.
	Loop Loop
	// Log receives every log line; nil discards them.
	Log *slog.Logger
	// OnBadValue, if set, is called on the watcher's goroutine for each
	// key skipped because its value does not decode (resource: its
	// resource's keyword) or it belongs to no known resource (resource
	// ""): for a metric. It must not block.
	OnBadValue func(resource string)
	// DelayLocalResync is how long after Start the watcher waits for a
	// remote resync before it resyncs from the mirror; 0 turns the local
	// fallback off.
	DelayLocalResync time.Duration
	// RetryInterval is the wait before a failed resync or a refused push is
	// retried; 0 means DefaultRetryInterval.
	RetryInterval time.Duration
	// MirrorPrefix is the key prefix of the mirror in Local; "" means
	// DefaultMirrorPrefix.
	MirrorPrefix string
	// Prefixes are the prefixes (relative to codec.KSRPrefix) listed and
	// watched, one list and one watch each (dbresources.WatchPrefixes
	// gives an agent's); an entry that does not end with "/" is one exact
	// key. None may be a prefix of another. Empty means the whole of
	// codec.KSRPrefix, one list and one watch.
	Prefixes []string
}

// normalize fills the defaults of zero fields.
func (c *Config) normalize() {
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.RetryInterval == 0 {
		c.RetryInterval = DefaultRetryInterval
	}
	if c.MirrorPrefix == "" {
		c.MirrorPrefix = DefaultMirrorPrefix
	}
	if len(c.Prefixes) == 0 {
		c.Prefixes = []string{""}
	}
}

// validate names every missing field and bad value; call normalize first.
func (c *Config) validate() error {
	var errs []error
	if c.Remote == nil {
		errs = append(errs, errors.New("field Remote is nil (the etcd store is required)"))
	}
	if c.Loop == nil {
		errs = append(errs, errors.New("field Loop is nil (the event loop is required)"))
	}
	if c.DelayLocalResync < 0 {
		errs = append(errs, fmt.Errorf("DelayLocalResync: %s is negative (0 turns the local fallback off)", c.DelayLocalResync))
	}
	if c.RetryInterval < 0 {
		errs = append(errs, fmt.Errorf("RetryInterval: %s is negative", c.RetryInterval))
	}
	for i, a := range c.Prefixes {
		for j, b := range c.Prefixes {
			if i != j && strings.HasPrefix(a, b) {
				errs = append(errs, fmt.Errorf("field Prefixes: %q covers %q (each key must be read by one watch)", b, a))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("dbwatcher config: %w", errors.Join(errs...))
	}
	return nil
}
