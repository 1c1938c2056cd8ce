// Package agent_test holds the repository-wide rules that no single
// package can check for itself.
package agent_test

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/contiv-ipam/agent/"

// Arrows point down (DESIGN.md, Layout): each rule lists what the
// packages matching pattern may depend on among this repository's
// packages, directly or through others; the standard library and
// third-party modules are not restricted here.
func TestImportsPointDown(t *testing.T) {
	rules := []struct {
		pattern string
		allowed []string // our package trees it may use; its own tree is always allowed
	}{
		// The engine every face shares is a floor of its own: the address
		// arithmetic is a leaf, and the allocator imports only it (no
		// framework, no I/O packages of ours, no plugin).
		{"engine/cidr", nil},
		{"engine/ipalloc", []string{"engine/cidr"}},
		// The framework never imports a plugin.
		{"infra/...", nil},
		// The controller uses the Kubernetes-state models, never a handler.
		{"plugins/controller/...", []string{"plugins/ksr/model", "infra"}},
		// Node IPAM sits on the engine and the key-value API, and speaks the
		// pool-block protocol and the agents' presence keys of the
		// Kubernetes-state models, nothing else.
		{"plugins/nodeipam/...", []string{"engine/ipalloc", "engine/cidr", "infra/kvdb",
			"plugins/ksr/model/codec", "plugins/ksr/model/poolblock",
			// the agents' presence keys: a deleted Node's blocks stay
			// fenced while its agent may hold addresses in them
			"plugins/ksr/model/vppnode"}},
		// The allocation core knows its store, the engine, the addressing
		// and the records it keeps, and the CNI vocabulary of podmanager
		// (AttachmentKey, ErrTryAgain); never the IPAM plugin, its REST
		// surface or another face.
		{"plugins/ipam/addressing", []string{"engine", "plugins/contivconf", "infra",
			"plugins/controller/api", "plugins/ksr/model"}}, // the last two through contivconf
		{"plugins/ipam/keeper", []string{"engine", "infra", "plugins/ipam/addressing",
			"plugins/ipam/checkpoint", "plugins/ksr/model", "plugins/podmanager",
			"plugins/controller/api", "plugins/contivconf"}},
		// The CAPI framework knows nothing of ours; the pool engine sits on
		// the allocator engine and the pool API.
		{"plugins/capi/ipamutil", nil},
		{"plugins/capi/pool", []string{"engine/ipalloc", "engine/cidr", "plugins/capi/api", "plugins/capi/ipamutil"}},
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list imports: %v", err)
	}
	for _, r := range rules {
		t.Run(r.pattern, func(t *testing.T) {
			out, err := exec.Command(goTool, "list", "-deps", module+r.pattern).Output()
			if err != nil {
				t.Fatalf("go list -deps %s: %v", r.pattern, err)
			}
			own := strings.TrimSuffix(r.pattern, "/...")
			for _, pkg := range strings.Fields(string(out)) {
				if strings.HasPrefix(pkg, module) && !under(pkg, own) && !allowed(pkg, r.allowed) {
					t.Errorf("%s depends on %s", r.pattern, strings.TrimPrefix(pkg, module))
				}
			}
		})
	}
}

func allowed(pkg string, trees []string) bool {
	for _, tree := range trees {
		if under(pkg, tree) {
			return true
		}
	}
	return false
}

// under tells whether pkg is the package tree of this repository or one
// below it.
func under(pkg, tree string) bool {
	return pkg == module+tree || strings.HasPrefix(pkg, module+tree+"/")
}
