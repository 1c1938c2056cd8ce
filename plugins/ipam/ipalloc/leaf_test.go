package ipalloc

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// cidrPath is the one package of this repository ipalloc may import.
const cidrPath = "github.com/contiv-ipam/agent/plugins/ipam/cidr"

// The engine stays pure: its non-test files import the standard library
// and the cidr arithmetic only (cidr's own test keeps it a leaf).
func TestImportsOnlyTheLeafArithmetic(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files: %v", err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			first, _, _ := strings.Cut(path, "/")
			if strings.Contains(first, ".") && path != cidrPath {
				t.Errorf("%s imports %s: allowed are the standard library and %s", name, path, cidrPath)
			}
		}
	}
}
