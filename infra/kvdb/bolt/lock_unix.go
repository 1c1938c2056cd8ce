//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package bolt

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	berrors "go.etcd.io/bbolt/errors"
)

// lockRetry is how often a held lock is tried again (bbolt's own pace).
const lockRetry = 50 * time.Millisecond

// lockFile takes the exclusive flock that bbolt takes, on f, so that the
// file is checked while no other agent can write it. bbolt's own flock on
// this same open file then succeeds at once, and bbolt releases it when
// it closes the file. A timeout of 0 waits forever; otherwise a lock
// still held after timeout is berrors.ErrTimeout, as from bbolt.Open.
func lockFile(f *os.File, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case !errors.Is(err, syscall.EWOULDBLOCK):
			return fmt.Errorf("flock: %w", err)
		case timeout > 0 && time.Now().After(deadline):
			return berrors.ErrTimeout
		}
		time.Sleep(lockRetry)
	}
}
