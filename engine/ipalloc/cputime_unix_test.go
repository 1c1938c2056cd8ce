//go:build unix

package ipalloc

import (
	"syscall"
	"time"
)

// cpuTime returns the CPU time the process has used (user and system), so
// that a benchmark on a busy machine can report what it cost rather than
// how long it waited.
func cpuTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
