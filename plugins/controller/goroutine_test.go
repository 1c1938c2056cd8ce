package controller

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestGoroutineIDTellsGoroutinesApart(t *testing.T) {
	g := NewWithT(t)
	mine := goroutineID()
	g.Expect(mine).NotTo(BeZero())
	g.Expect(goroutineID()).To(Equal(mine))
	other := make(chan uint64)
	go func() { other <- goroutineID() }()
	g.Expect(<-other).NotTo(Equal(mine))
}

func BenchmarkGoroutineID(b *testing.B) {
	for b.Loop() {
		_ = goroutineID()
	}
}
