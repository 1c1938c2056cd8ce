//go:build node

package node

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/contiv-ipam/agent/tests/testenv"
)

// EnvKeep, when set, makes StartT keep the node's directory (every
// process's log and data) in the system's temporary directory instead of
// t.TempDir(); the machine is cleaned up all the same.
const EnvKeep = "CONTIV_NODE_KEEP"

// StartT is Start for a test: the binaries of testenv.Main and the make
// targets, the node in t.TempDir() (see EnvKeep), progress in the test
// log. At cleanup
// the node is stopped (if the test has not done it), the test fails if
// anything of it is left on the machine, and after a failure the end of
// each log is printed.
func StartT(t testing.TB, opts Options) *Node {
	t.Helper()
	bins, err := FindBins(testenv.Binaries().Dir)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	dir := t.TempDir()
	if os.Getenv(EnvKeep) != "" {
		if dir, err = os.MkdirTemp("", "contiv-node-"+strings.ReplaceAll(t.Name(), "/", "_")+"-"); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s is set: the node's directory %s stays after the test", EnvKeep, dir)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	n, err := Start(ctx, dir, bins, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			n.LogTails(t.Logf, 25)
		}
		if err := n.Stop(); err != nil {
			t.Errorf("stop node %s: %v", n.Name, err)
		}
		if left := n.Leftovers(); len(left) > 0 {
			t.Errorf("node %s left on the machine:\n%v", n.Name, left)
		}
	})
	return n
}

// LogTails prints the last lines of every log of the node with logf.
func (n *Node) LogTails(logf func(string, ...any), lines int) {
	if n.Kubelet != nil {
		logf("%s", tailFile(n.Kubelet.Log(), lines))
	}
	if n.Containerd != nil {
		logf("%s", tailFile(n.Containerd.Log(), lines))
	}
	if n.Contiv != nil {
		for _, p := range n.Contiv.Procs() {
			logf("%s", tailFile(p.Log, lines))
		}
	}
	if n.control != nil {
		for _, p := range n.control.procs() {
			logf("%s", p.tail(lines))
		}
	}
}
