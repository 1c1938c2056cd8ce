package logging

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"sort"
	"sync"
)

// DefaultName is the pseudo logger name that stands for loggers not created yet.
const DefaultName = "default"

// EnvInitialLevel names the environment variable read by Default.
const EnvInitialLevel = "INITIAL_LOGLVL"

// MaxRememberedLevels bounds the levels remembered for loggers that do not
// exist yet (the agent creates a few dozen loggers; names come from
// config and REST clients, so the map must not grow without bound).
const MaxRememberedLevels = 256

// ErrTooManyRemembered: SetLevel for a logger that does not exist yet
// while MaxRememberedLevels levels are remembered for such loggers.
var ErrTooManyRemembered = errors.New("too many levels remembered for loggers that do not exist yet")

var validName = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)

// Registry hands out named loggers that share one output handler and have
// one level each. It is safe for concurrent use.
type Registry struct {
	base slog.Handler

	mu           sync.Mutex
	defaultLevel slog.Level
	loggers      map[string]*named
	// remembered holds the levels set for names without a logger yet, at
	// most MaxRememberedLevels; Logger takes a name's level out of it.
	remembered map[string]slog.Level
}

type named struct {
	level  *slog.LevelVar
	logger *slog.Logger
}

// Option configures a Registry.
type Option func(*registryOptions)

type registryOptions struct {
	out   io.Writer
	json  bool
	level slog.Level
}

// WithOutput sends log records to w instead of os.Stderr.
func WithOutput(w io.Writer) Option { return func(o *registryOptions) { o.out = w } }

// WithJSON writes records as JSON lines instead of logfmt text.
func WithJSON() Option { return func(o *registryOptions) { o.json = true } }

// WithLevel sets the level of loggers created without a remembered level.
func WithLevel(l slog.Level) Option { return func(o *registryOptions) { o.level = l } }

// NewRegistry builds a registry writing to stderr at level info unless told
// otherwise.
func NewRegistry(opts ...Option) *Registry {
	o := registryOptions{out: os.Stderr, level: slog.LevelInfo}
	for _, opt := range opts {
		opt(&o)
	}
	ho := &slog.HandlerOptions{Level: LevelTrace, ReplaceAttr: nameTraceLevel}
	var base slog.Handler = slog.NewTextHandler(o.out, ho)
	if o.json {
		base = slog.NewJSONHandler(o.out, ho)
	}
	return &Registry{
		base:         base,
		defaultLevel: o.level,
		loggers:      map[string]*named{},
		remembered:   map[string]slog.Level{},
	}
}

var (
	defaultOnce sync.Once
	defaultReg  *Registry
)

// Default returns the process-wide registry, created on first use with the
// level named by INITIAL_LOGLVL (info when unset or unparsable).
func Default() *Registry {
	defaultOnce.Do(func() {
		lvl := slog.LevelInfo
		if v, ok := os.LookupEnv(EnvInitialLevel); ok {
			if parsed, err := ParseLevel(v); err == nil {
				lvl = parsed
			}
		}
		defaultReg = NewRegistry(WithLevel(lvl))
	})
	return defaultReg
}

// Logger returns the logger called name, creating it on first use.
func (r *Registry) Logger(name string) *slog.Logger {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n, ok := r.loggers[name]; ok {
		return n.logger
	}
	lv := new(slog.LevelVar)
	lv.Set(r.defaultLevel)
	if l, ok := r.remembered[name]; ok {
		lv.Set(l)
		delete(r.remembered, name)
	}
	h := &levelHandler{next: r.base, level: lv}
	n := &named{level: lv, logger: slog.New(h).With(slog.String("logger", name))}
	r.loggers[name] = n
	return n.logger
}

// Lookup returns the logger called name if it exists.
func (r *Registry) Lookup(name string) (*slog.Logger, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, ok := r.loggers[name]
	if !ok {
		return nil, false
	}
	return n.logger, true
}

// ListLoggers returns every existing logger's name and level name.
func (r *Registry) ListLoggers() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]string, len(r.loggers))
	for name, n := range r.loggers {
		out[name] = LevelName(n.level.Level())
	}
	return out
}

// Names returns the existing logger names, sorted.
func (r *Registry) Names() []string {
	m := r.ListLoggers()
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// SetLevel sets the level of the logger called name. For a name without a
// logger the level is remembered and applied when it is created; beyond
// MaxRememberedLevels such names the call fails with ErrTooManyRemembered
// (changing a name already remembered always works). The name "default"
// sets the level of loggers created from now on.
func (r *Registry) SetLevel(name, level string) error {
	lvl, err := ParseLevel(level)
	if err != nil {
		return err
	}
	if !validName.MatchString(name) {
		return fmt.Errorf("invalid logger name %q (letters, digits, '.', '_' and '-' only)", name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if name == DefaultName {
		r.defaultLevel = lvl
		return nil
	}
	if n, ok := r.loggers[name]; ok {
		n.level.Set(lvl)
		return nil
	}
	if _, ok := r.remembered[name]; !ok && len(r.remembered) >= MaxRememberedLevels {
		return fmt.Errorf("no such logger yet, and %w (limit %d): set its level once it exists",
			ErrTooManyRemembered, MaxRememberedLevels)
	}
	r.remembered[name] = lvl
	return nil
}

// SetAllLevels sets the default level and the level of every existing logger.
func (r *Registry) SetAllLevels(lvl slog.Level) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.defaultLevel = lvl
	for _, n := range r.loggers {
		n.level.Set(lvl)
	}
}

// GetLevel returns the level name of the logger called name ("default" gives
// the level for new loggers).
func (r *Registry) GetLevel(name string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if name == DefaultName {
		return LevelName(r.defaultLevel), nil
	}
	n, ok := r.loggers[name]
	if !ok {
		return "", fmt.Errorf("logger %q not found", name)
	}
	return LevelName(n.level.Level()), nil
}

// levelHandler filters records by its own level before the shared handler.
type levelHandler struct {
	next  slog.Handler
	level *slog.LevelVar
}

func (h *levelHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.level.Level() && h.next.Enabled(ctx, l)
}

func (h *levelHandler) Handle(ctx context.Context, rec slog.Record) error {
	return h.next.Handle(ctx, rec)
}

func (h *levelHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &levelHandler{next: h.next.WithAttrs(attrs), level: h.level}
}

func (h *levelHandler) WithGroup(name string) slog.Handler {
	return &levelHandler{next: h.next.WithGroup(name), level: h.level}
}

func nameTraceLevel(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.LevelKey {
		if l, ok := a.Value.Any().(slog.Level); ok && l <= LevelTrace {
			a.Value = slog.StringValue("TRACE")
		}
	}
	return a
}
