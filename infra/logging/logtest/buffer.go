// Package logtest has what tests need to read the logs of the code under
// test. It imports nothing of this repository.
package logtest

import (
	"bytes"
	"sync"
)

// Buffer collects log output: an io.Writer for a slog handler that any
// number of goroutines may write to while the test reads String.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
