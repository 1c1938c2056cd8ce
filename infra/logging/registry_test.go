package logging_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/logging"
	"github.com/contiv-ipam/agent/infra/logging/logtest"
)

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer = logtest.Buffer

func TestLevelsPerLogger(t *testing.T) {
	g := NewWithT(t)
	out := &syncBuffer{}
	reg := logging.NewRegistry(logging.WithOutput(out))
	a, b := reg.Logger("a"), reg.Logger("b")
	g.Expect(reg.SetLevel("a", "debug")).To(Succeed())
	a.Debug("from a")
	b.Debug("from b")
	b.Info("info b")
	g.Expect(out.String()).To(ContainSubstring("from a"))
	g.Expect(out.String()).To(ContainSubstring("logger=a"))
	g.Expect(out.String()).NotTo(ContainSubstring("from b"))
	g.Expect(out.String()).To(ContainSubstring("info b"))
	g.Expect(reg.ListLoggers()).To(Equal(map[string]string{"a": "debug", "b": "info"}))
	g.Expect(reg.Logger("a")).To(BeIdenticalTo(a), "same name, same logger")
}

func TestRememberedAndDefaultLevels(t *testing.T) {
	g := NewWithT(t)
	out := &syncBuffer{}
	reg := logging.NewRegistry(logging.WithOutput(out))
	g.Expect(reg.SetLevel("later", "trace")).To(Succeed())
	g.Expect(reg.SetLevel(logging.DefaultName, "error")).To(Succeed())
	later, other := reg.Logger("later"), reg.Logger("other")
	later.Log(t.Context(), logging.LevelTrace, "tracing")
	other.Warn("hidden")
	g.Expect(out.String()).To(ContainSubstring("level=TRACE"))
	g.Expect(out.String()).NotTo(ContainSubstring("hidden"))
	lvl, err := reg.GetLevel("other")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lvl).To(Equal("error"))
	lvl, _ = reg.GetLevel(logging.DefaultName)
	g.Expect(lvl).To(Equal("error"))
}

func TestSetAllLevelsAndChildren(t *testing.T) {
	g := NewWithT(t)
	out := &syncBuffer{}
	reg := logging.NewRegistry(logging.WithOutput(out))
	parent := reg.Logger("ipam")
	child := reg.Logger("ipam.alloc")
	reg.SetAllLevels(slog.LevelDebug)
	parent.Debug("p")
	child.With("pod", "x").Debug("c")
	g.Expect(strings.Count(out.String(), "level=DEBUG")).To(Equal(2))
	g.Expect(reg.Names()).To(Equal([]string{"ipam", "ipam.alloc"}))
	g.Expect(reg.SetLevel("ipam.alloc", "error")).To(Succeed())
	child.With("k", "v").WithGroup("grp").Info("still filtered")
	g.Expect(out.String()).NotTo(ContainSubstring("still filtered"))
}

func TestBadInput(t *testing.T) {
	g := NewWithT(t)
	reg := logging.NewRegistry(logging.WithOutput(&syncBuffer{}))
	g.Expect(reg.SetLevel("x", "loud")).To(MatchError(ContainSubstring(`unknown log level "loud"`)))
	g.Expect(reg.SetLevel("bad name!", "info")).To(MatchError(ContainSubstring(`invalid logger name "bad name!"`)))
	_, err := reg.GetLevel("missing")
	g.Expect(err).To(MatchError(ContainSubstring(`logger "missing" not found`)))
	for _, name := range []string{"trace", "debug", "info", "warn", "warning", "ERROR"} {
		lvl, err := logging.ParseLevel(name)
		g.Expect(err).NotTo(HaveOccurred())
		want := strings.ToLower(name)
		if want == "warning" {
			want = "warn"
		}
		g.Expect(logging.LevelName(lvl)).To(Equal(want))
	}
}

func TestJSONOutput(t *testing.T) {
	g := NewWithT(t)
	out := &syncBuffer{}
	reg := logging.NewRegistry(logging.WithOutput(out), logging.WithJSON(), logging.WithLevel(slog.LevelWarn))
	reg.Logger("j").Info("dropped")
	reg.Logger("j").Warn("kept")
	g.Expect(out.String()).To(ContainSubstring(`"logger":"j"`))
	g.Expect(out.String()).NotTo(ContainSubstring("dropped"))
}

// Levels remembered for loggers that do not exist yet are bounded: beyond
// MaxRememberedLevels names the call fails, naming the logger and the
// limit; existing loggers, names already remembered and "default" still
// work, and creating a logger frees its slot.
func TestRememberedLevelsAreBounded(t *testing.T) {
	g := NewWithT(t)
	reg := logging.NewRegistry(logging.WithOutput(&syncBuffer{}))
	reg.Logger("exists")
	for i := range logging.MaxRememberedLevels {
		g.Expect(reg.SetLevel(fmt.Sprintf("future-%d", i), "debug")).To(Succeed())
	}
	err := reg.SetLevel("one-too-many", "debug")
	g.Expect(err).To(MatchError(logging.ErrTooManyRemembered))
	g.Expect(err).To(MatchError("no such logger yet, and too many levels remembered for loggers " +
		"that do not exist yet (limit 256): set its level once it exists"))

	g.Expect(reg.SetLevel("exists", "debug")).To(Succeed(), "an existing logger")
	g.Expect(reg.SetLevel("future-7", "error")).To(Succeed(), "a name already remembered")
	g.Expect(reg.SetLevel(logging.DefaultName, "warn")).To(Succeed())

	reg.Logger("future-7") // takes its remembered level, frees the slot
	g.Expect(reg.GetLevel("future-7")).To(Equal("error"))
	g.Expect(reg.SetLevel("one-too-many", "debug")).To(Succeed())
}
