//go:build node

package node

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/tests/kubeenv"
)

// The directory the code looks in is the one `make node-bins` installs
// into.
func TestNodeBinsVersionMatchesTheMakefile(t *testing.T) {
	g := NewWithT(t)
	cmd := exec.Command("make", "--no-print-directory", "--eval", "print-%: ; @echo $($*)", "print-NODE_VERSION")
	cmd.Dir = kubeenv.RepoRoot()
	out, err := cmd.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	g.Expect(strings.TrimSpace(string(out))).To(Equal(NodeBinsVersion))
}

// A missing binary is named, with the make target that installs it.
func TestFindBinsNamesTheMakeTarget(t *testing.T) {
	g := NewWithT(t)
	empty := t.TempDir()
	t.Setenv(EnvNodeBins, empty)
	contiv := t.TempDir()
	for _, b := range []string{"contiv-agent", "contiv-ksr", "contiv-cni"} {
		g.Expect(os.WriteFile(filepath.Join(contiv, b), nil, 0o755)).To(Succeed())
	}
	_, err := FindBins(contiv)
	g.Expect(err).To(MatchError(And(ContainSubstring(empty), ContainSubstring("make node-bins"))))
}
