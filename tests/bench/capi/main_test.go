package capi

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// TestMain drops the logs of the libraries before anything runs:
// controller-runtime prints a stack to stdout when no logger was set 30 s
// into the process (envtest logs through it), and klog writes to stderr;
// either can land inside a benchmark line, which the report reads.
func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}
