package controller

import (
	"bytes"
	"runtime"
	"strconv"
)

// goroutineID returns the calling goroutine's id, parsed from the first
// line of its stack ("goroutine 42 [running]:"). The loop uses it only to
// tell events pushed by its own handlers (follow-ups) from the others.
func goroutineID() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return 0
	}
	return id
}
