package capi

import (
	"os"
	"testing"

	"github.com/contiv-ipam/agent/tests/bench/internal/kubebench"
)

// TestMain drops the libraries' logs before anything runs (see
// kubebench.QuietLogs): they could land inside a benchmark line.
func TestMain(m *testing.M) {
	kubebench.QuietLogs()
	os.Exit(m.Run())
}
