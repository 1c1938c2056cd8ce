package etcdlog

import (
	"context"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync/atomic"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// New returns a zap logger that writes every record at or above min to log.
func New(log *slog.Logger, min zapcore.Level) *zap.Logger {
	return zap.New(&core{log: log, min: min})
}

// NewMutable is New with a switch: while demote is true, records are
// written at debug level (used to hide the expected errors etcd logs while
// it shuts down).
func NewMutable(log *slog.Logger, min zapcore.Level, demote *atomic.Bool) *zap.Logger {
	return zap.New(&core{log: log, min: min, demote: demote})
}

// expectedWarnings are warnings etcd always logs for a single-member
// server on loopback, such as the embedded one; they are written at debug
// level because the user can do nothing about them.
var expectedWarnings = map[string]bool{
	"Running http and grpc server on single port. This is not recommended for production.": true,
	"simple token is not cryptographically signed":                                         true,
}

// Every brand-new data directory races etcd's storage-version monitor
// (etcd v3.6, etcdserver/version/monitor.go, UpdateStorageVersionIfNeeded):
// the monitor wakes as soon as the cluster version is first set, before the
// backend has committed its first batch, so schema detection finds neither
// the storage version nor the raft term and fails with "missing term
// information" (storage/schema/schema.go, UnsafeDetectSchemaVersion).
// etcd logs that at error level ("failed to update storage version", and
// "Failed to detect schema version" as a warning from StorageVersion), then
// retries every monitorVersionInterval (4s), when the term is on disk and
// the migration succeeds: we measured the storage version at 3.5 right
// after the error and 3.6 a few seconds later. Nothing is lost and nobody
// can act on it, so these two messages are written at debug level when,
// and only when, their error is this one; any other storage-version error
// keeps its level.
var bootstrapRace = map[string]bool{
	"failed to update storage version": true,
	"Failed to detect schema version":  true,
}

// bootstrapRaceError is the error of the bootstrap race.
const bootstrapRaceError = "missing term information"

// isBootstrapRace reports whether a record is the benign bootstrap race.
func isBootstrapRace(msg string, all []slog.Attr) bool {
	if !bootstrapRace[msg] {
		return false
	}
	for _, a := range all {
		if a.Key == "error" && strings.Contains(a.Value.String(), bootstrapRaceError) {
			return true
		}
	}
	return false
}

// core is a zapcore.Core writing to slog.
type core struct {
	log    *slog.Logger
	min    zapcore.Level
	demote *atomic.Bool
	attrs  []slog.Attr
}

var _ zapcore.Core = (*core)(nil)

func (c *core) Enabled(l zapcore.Level) bool { return l >= c.min }

func (c *core) With(fields []zapcore.Field) zapcore.Core {
	return &core{log: c.log, min: c.min, demote: c.demote, attrs: append(slices.Clone(c.attrs), attrs(fields)...)}
}

func (c *core) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *core) Write(e zapcore.Entry, fields []zapcore.Field) error {
	all := append(slices.Clone(c.attrs), attrs(fields)...)
	lvl := level(e.Level)
	if c.demote != nil && c.demote.Load() || expectedWarnings[e.Message] || isBootstrapRace(e.Message, all) {
		lvl = slog.LevelDebug
	}
	c.log.LogAttrs(context.Background(), lvl, e.Message, all...)
	return nil
}

func (c *core) Sync() error { return nil }

// attrs converts zap fields to slog attributes, sorted by key.
func attrs(fields []zapcore.Field) []slog.Attr {
	if len(fields) == 0 {
		return nil
	}
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	keys := make([]string, 0, len(enc.Fields))
	for k := range enc.Fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]slog.Attr, len(keys))
	for i, k := range keys {
		out[i] = slog.Any(k, enc.Fields[k])
	}
	return out
}

func level(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	}
	return slog.LevelError
}
