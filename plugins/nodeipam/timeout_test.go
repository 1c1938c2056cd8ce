package nodeipam

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// Next after each Update: Resync while ok; InitialRetry after the first
// error, doubling up to MaxBackoff; Resync again after a success.
func TestTimeoutBacksOffOnErrorsAndResetsOnSuccess(t *testing.T) {
	g := NewWithT(t)
	to := Timeout{Resync: time.Minute, MaxBackoff: 10 * time.Second, InitialRetry: time.Second}
	g.Expect(to.Next()).To(Equal(time.Minute), "before any operation")
	steps := []struct {
		ok   bool
		want time.Duration
	}{
		{true, time.Minute},
		{false, time.Second},
		{false, 2 * time.Second},
		{false, 4 * time.Second},
		{false, 8 * time.Second},
		{false, 10 * time.Second},
		{false, 10 * time.Second},
		{true, time.Minute},
		{false, time.Second},
		{true, time.Minute},
		{true, time.Minute},
	}
	for i, s := range steps {
		to.Update(s.ok)
		g.Expect(to.Next()).To(Equal(s.want), "step %d (ok=%v)", i, s.ok)
	}
}

// A MaxBackoff below twice InitialRetry caps the second retry already.
func TestTimeoutCapsAtMaxBackoff(t *testing.T) {
	g := NewWithT(t)
	to := Timeout{Resync: time.Minute, MaxBackoff: 300 * time.Millisecond, InitialRetry: 250 * time.Millisecond}
	to.Update(false)
	g.Expect(to.Next()).To(Equal(250 * time.Millisecond))
	to.Update(false)
	g.Expect(to.Next()).To(Equal(300 * time.Millisecond))
}
