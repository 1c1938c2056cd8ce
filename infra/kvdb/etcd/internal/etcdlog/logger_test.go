package etcdlog

import (
	"bytes"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

func TestRecordsReachSlog(t *testing.T) {
	g := NewWithT(t)
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	z := New(log, zapcore.WarnLevel).With(zap.String("member", "m1"))
	z.Info("chatty")
	z.Warn("slow disk", zap.Duration("took", 2e9), zap.Int("n", 3))
	z.Error("broken")
	out := buf.String()
	g.Expect(out).NotTo(ContainSubstring("chatty"), "below min")
	g.Expect(out).To(ContainSubstring(`level=WARN msg="slow disk" member=m1 n=3 took=2s`))
	g.Expect(out).To(ContainSubstring(`level=ERROR msg=broken member=m1`))
}

func TestDemote(t *testing.T) {
	g := NewWithT(t)
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var demote atomic.Bool
	z := NewMutable(log, zapcore.WarnLevel, &demote)
	z.Error("real")
	demote.Store(true)
	z.Error("shutting down")
	g.Expect(buf.String()).To(ContainSubstring(`level=ERROR msg=real`))
	g.Expect(buf.String()).To(ContainSubstring(`level=DEBUG msg="shutting down"`))
}

func TestExpectedSingleMemberWarningsAreDebug(t *testing.T) {
	g := NewWithT(t)
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	z := New(log, zapcore.WarnLevel)
	z.Warn("simple token is not cryptographically signed")
	z.Warn("slow disk")
	g.Expect(buf.String()).To(ContainSubstring(`level=DEBUG msg="simple token is not cryptographically signed"`))
	g.Expect(buf.String()).To(ContainSubstring(`level=WARN msg="slow disk"`))
}

// The storage-version errors of a brand-new data directory (a benign race
// etcd retries) are written at debug level; the same messages with any
// other error keep their level.
func TestBootstrapStorageVersionRaceIsDebug(t *testing.T) {
	missingTerm := errors.New("cannot detect storage schema version: missing term information")
	cases := []struct {
		name, msg string
		level     zapcore.Level
		err       error
		want      string
	}{
		{"update failed at bootstrap", "failed to update storage version", zapcore.ErrorLevel, missingTerm, "level=DEBUG"},
		{"detection failed at bootstrap", "Failed to detect schema version", zapcore.WarnLevel,
			errors.New("missing term information"), "level=DEBUG"},
		{"another migration error", "failed to update storage version", zapcore.ErrorLevel,
			errors.New(`cannot create migration plan: version "3.7.0" is not supported`), "level=ERROR"},
		{"another message with that error", "failed to apply request", zapcore.ErrorLevel, missingTerm, "level=ERROR"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var buf bytes.Buffer
			z := New(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), zapcore.WarnLevel)
			if ce := z.Check(tc.level, tc.msg); ce != nil {
				ce.Write(zap.String("cluster-version", "3.6.0"), zap.Error(tc.err))
			}
			g.Expect(buf.String()).To(ContainSubstring(tc.want))
			g.Expect(buf.String()).To(ContainSubstring(tc.msg))
		})
	}
}
