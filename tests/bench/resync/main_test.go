package resync

import (
	"testing"

	"github.com/contiv-ipam/agent/tests/testenv"
)

// TestMain builds the agent only when benchmarks are asked for: the
// plain test run is in process and has nothing to exec.
func TestMain(m *testing.M) { testenv.BenchMain(m) }
