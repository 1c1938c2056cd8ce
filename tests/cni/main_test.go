package cni

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/contiv-ipam/agent/tests/testenv"
)

// TestMain checks what the suite needs of the machine, then lets testenv
// build the binaries and run the tests.
func TestMain(m *testing.M) {
	for _, p := range []string{"ptp", "host-local"} {
		if _, err := os.Stat(filepath.Join(debianPlugins, p)); err != nil {
			fmt.Fprintf(os.Stderr, "tests/cni: %v: run `make test-deps` (Debian containernetworking-plugins)\n", err)
			os.Exit(2)
		}
	}
	for _, bin := range []string{"ip", "ping"} {
		if _, err := exec.LookPath(bin); err != nil {
			fmt.Fprintf(os.Stderr, "tests/cni: %v: the ptp tests run it (iproute2, iputils-ping)\n", err)
			os.Exit(2)
		}
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "tests/cni: runs as root (ip netns add, ptp): run it with sudo or as CI does")
		os.Exit(2)
	}
	testenv.Main(m)
}
