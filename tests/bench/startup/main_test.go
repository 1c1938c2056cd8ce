package startup

import (
	"flag"
	"os"
	"testing"

	"github.com/contiv-ipam/agent/tests/testenv"
)

// TestMain builds the agent (testenv.Main) only when benchmarks are asked
// for: the plain test run is in process and has nothing to exec.
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		os.Exit(m.Run())
	}
	testenv.Main(m)
}
