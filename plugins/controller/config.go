package controller

import (
	"errors"
	"fmt"
	"time"

	"github.com/contiv-ipam/agent/plugins/controller/dbresources"
)

// Config is controller.conf. Key names follow the original Contiv
// controller; durations are strings such as "5s".
type Config struct {
	// EnableRetry retries a failed commit of an update transaction.
	EnableRetry bool `json:"enableRetry"`
	// DelayRetry is the wait before the first retry.
	DelayRetry time.Duration `json:"delayRetry"`
	// MaxRetryAttempts bounds the retries of one commit.
	MaxRetryAttempts int `json:"maxRetryAttempts"`
	// EnableExpBackoffRetry doubles the delay after each retry.
	EnableExpBackoffRetry bool `json:"enableExpBackoffRetry"`
	// DelayLocalResync is how long the DB watcher waits for etcd before it
	// resyncs from the bolt mirror.
	DelayLocalResync time.Duration `json:"delayLocalResync"`
	// StartupResyncDeadline is how long the loop waits for the first DB
	// resync before it reports a fatal error.
	StartupResyncDeadline time.Duration `json:"startupResyncDeadline"`
	// EnablePeriodicHealing runs a DownstreamResync every PeriodicHealingInterval.
	EnablePeriodicHealing   bool          `json:"enablePeriodicHealing"`
	PeriodicHealingInterval time.Duration `json:"periodicHealingInterval"`
	// DelayAfterErrorHealing is the wait before the healing resync that
	// follows a failed update.
	DelayAfterErrorHealing time.Duration `json:"delayAfterErrorHealing"`
	// RemoteDBProbingInterval is accepted for compatibility with Contiv's
	// controller.conf; the etcd plugin's probe-interval does the probing.
	RemoteDBProbingInterval time.Duration `json:"remoteDBProbingInterval"`
	// RecordEventHistory keeps processed events for GET /controller/event-history.
	RecordEventHistory bool `json:"recordEventHistory"`
	// EventHistoryAgeLimit drops records older than this...
	EventHistoryAgeLimit time.Duration `json:"eventHistoryAgeLimit"`
	// PermanentlyRecordedInitPeriod ...except those of this first period
	// after start.
	PermanentlyRecordedInitPeriod time.Duration `json:"permanentlyRecordedInitPeriod"`
	// EnableVerification compares the southbound with the desired
	// configuration after every event and records any difference.
	EnableVerification bool `json:"enableVerification"`
	// StuckEventTimeout is how long one event may be processed before the
	// loop counts as stuck: its health (and the agent's /liveness) turns
	// to error until the event ends.
	StuckEventTimeout time.Duration `json:"stuckEventTimeout"`
	// EventQueueSize bounds the queue; PushEvent to a full queue fails,
	// PushEventWait (the DB watcher) waits for room.
	EventQueueSize int `json:"eventQueueSize"`
	// MaxHistoryRecords bounds the history whatever the age limit.
	MaxHistoryRecords int `json:"maxHistoryRecords"`
	// EventHistoryDefaultLimit is how many records (the newest) GET
	// /controller/event-history answers without a limit parameter.
	EventHistoryDefaultLimit int `json:"eventHistoryDefaultLimit"`
	// EventHistoryMaxLimit is the largest limit parameter accepted.
	EventHistoryMaxLimit int `json:"eventHistoryMaxLimit"`
	// EventHistoryMaxConcurrentReads bounds the event-history requests
	// answered at a time; the others get 503 with Retry-After.
	EventHistoryMaxConcurrentReads int `json:"eventHistoryMaxConcurrentReads"`
	// PodLayout is where contiv-ksr writes pods, so what the DB watcher
	// lists and watches: "node" (this node's pods alone, under
	// k8s/node-pods/<node>/) or "cluster" (every pod, under k8s/pod/:
	// contiv-ksr older than the per-node layout, or its podLayout
	// "cluster").
	PodLayout string `json:"podLayout"`
}

// DefaultConfig returns the defaults of the original controller.
func DefaultConfig() Config {
	return Config{
		EnableRetry:                    true,
		DelayRetry:                     time.Second,
		MaxRetryAttempts:               3,
		EnableExpBackoffRetry:          true,
		DelayLocalResync:               5 * time.Second,
		StartupResyncDeadline:          30 * time.Second,
		PeriodicHealingInterval:        time.Minute,
		DelayAfterErrorHealing:         5 * time.Second,
		RemoteDBProbingInterval:        3 * time.Second,
		RecordEventHistory:             true,
		EventHistoryAgeLimit:           24 * time.Hour,
		PermanentlyRecordedInitPeriod:  time.Hour,
		StuckEventTimeout:              2 * time.Minute,
		EventQueueSize:                 1000,
		MaxHistoryRecords:              10000,
		EventHistoryDefaultLimit:       100,
		EventHistoryMaxLimit:           1000,
		EventHistoryMaxConcurrentReads: 4,
		PodLayout:                      dbresources.PodLayoutNode,
	}
}

// Validate names every bad key and value.
func (c *Config) Validate() error {
	var errs []error
	positive := []struct {
		key string
		d   time.Duration
	}{
		{"delayLocalResync", c.DelayLocalResync},
		{"startupResyncDeadline", c.StartupResyncDeadline},
		{"delayAfterErrorHealing", c.DelayAfterErrorHealing},
		{"eventHistoryAgeLimit", c.EventHistoryAgeLimit},
		{"stuckEventTimeout", c.StuckEventTimeout},
	}
	for _, p := range positive {
		if p.d <= 0 {
			errs = append(errs, fmt.Errorf("%s %s: want a positive duration", p.key, p.d))
		}
	}
	if c.EnablePeriodicHealing && c.PeriodicHealingInterval <= 0 {
		errs = append(errs, fmt.Errorf("periodicHealingInterval %s: want a positive duration with enablePeriodicHealing", c.PeriodicHealingInterval))
	}
	if c.EnableRetry && (c.MaxRetryAttempts < 1 || c.DelayRetry < 0) {
		errs = append(errs, fmt.Errorf("maxRetryAttempts %d, delayRetry %s: want at least 1 attempt and a delay >= 0 with enableRetry",
			c.MaxRetryAttempts, c.DelayRetry))
	}
	if c.PermanentlyRecordedInitPeriod < 0 {
		errs = append(errs, fmt.Errorf("permanentlyRecordedInitPeriod %s: want >= 0", c.PermanentlyRecordedInitPeriod))
	}
	if c.EventQueueSize < 1 {
		errs = append(errs, fmt.Errorf("eventQueueSize %d: want at least 1", c.EventQueueSize))
	}
	if c.MaxHistoryRecords < 1 {
		errs = append(errs, fmt.Errorf("maxHistoryRecords %d: want at least 1", c.MaxHistoryRecords))
	}
	errs = append(errs, c.validateHistoryReads()...)
	if c.PodLayout != dbresources.PodLayoutNode && c.PodLayout != dbresources.PodLayoutCluster {
		errs = append(errs, fmt.Errorf("podLayout %q: want %q or %q", c.PodLayout, dbresources.PodLayoutNode, dbresources.PodLayoutCluster))
	}
	return errors.Join(errs...)
}

// validateHistoryReads checks the limits of GET /controller/event-history.
func (c *Config) validateHistoryReads() []error {
	var errs []error
	if c.EventHistoryMaxLimit < 1 {
		errs = append(errs, fmt.Errorf("eventHistoryMaxLimit %d: want at least 1", c.EventHistoryMaxLimit))
	}
	if c.EventHistoryDefaultLimit < 1 || c.EventHistoryDefaultLimit > c.EventHistoryMaxLimit {
		errs = append(errs, fmt.Errorf("eventHistoryDefaultLimit %d: want 1..eventHistoryMaxLimit (%d)",
			c.EventHistoryDefaultLimit, c.EventHistoryMaxLimit))
	}
	if c.EventHistoryMaxConcurrentReads < 1 {
		errs = append(errs, fmt.Errorf("eventHistoryMaxConcurrentReads %d: want at least 1", c.EventHistoryMaxConcurrentReads))
	}
	return errs
}
