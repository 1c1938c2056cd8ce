package etcdlog

import (
	"bytes"
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
