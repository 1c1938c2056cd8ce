package main

import (
	"runtime"

	"github.com/containernetworking/cni/pkg/skel"
	cniversion "github.com/containernetworking/cni/pkg/version"
)

// Set by the Makefile (-ldflags -X).
var (
	version   = "dev"
	commit    = "unknown"
	buildDate = "unknown"
)

// SupportedVersions are the CNI spec versions contiv-cni speaks.
var SupportedVersions = []string{"0.3.1", "0.4.0", "1.0.0", "1.1.0"}

func main() {
	// One call, a few goroutines handing bytes to each other: on one P
	// they switch without waking a second thread each time.
	runtime.GOMAXPROCS(1)
	skel.PluginMainFuncs(funcs(), cniversion.PluginSupports(SupportedVersions...), about())
}

func about() string {
	return "contiv-cni " + version + " (commit " + commit + ", built " + buildDate + ")"
}
