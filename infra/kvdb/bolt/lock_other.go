//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package bolt

import (
	"os"
	"time"
)

// lockFile does nothing here: on these systems the file is checked
// before bbolt takes its lock, so a check can race with another agent
// that holds the file (bbolt's lock still stops that agent's twin).
func lockFile(*os.File, time.Duration) error { return nil }
