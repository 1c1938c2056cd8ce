//go:build node

package node

import (
	"os"
	"testing"

	"github.com/contiv-ipam/agent/tests/testenv"
)

// TestMain builds the binaries (testenv.Main), except in the child
// process of TestSweepAfterKill, which uses its parent's.
func TestMain(m *testing.M) {
	if os.Getenv(envKilledNode) != "" {
		os.Exit(m.Run())
	}
	testenv.Main(m)
}
