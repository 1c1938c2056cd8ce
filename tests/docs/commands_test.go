package docs

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// binaries are the commands docs/commands.md documents from their -h.
var binaries = []string{"contiv-agent", "contiv-ksr", "contiv-netctl"}

// flagLine is a flag as flag.PrintDefaults writes it: "  -name ...".
var flagLine = regexp.MustCompile(`(?m)^\s+-([a-z][a-z0-9-]*)\b`)

// commandLine is a command of contiv-netctl's usage: two spaces, then its
// words up to the first argument ("[", "-", an upper-case word, "file").
var commandLine = regexp.MustCompile(`(?m)^  ([a-z]+(?: [a-z]+)*)(?: |$)`)

// help builds name from cmd/<name> and returns what -h prints.
func help(t *testing.T, name string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	build := exec.Command("go", "build", "-o", bin, "./cmd/"+name)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/%s: %v\n%s", name, err, out)
	}
	var out bytes.Buffer
	cmd := exec.Command(bin, "-h")
	cmd.Stdout, cmd.Stderr = &out, &out
	_ = cmd.Run() // -h exits 0 or 2 depending on the flag package's handling
	if out.Len() == 0 {
		t.Fatalf("%s -h printed nothing", name)
	}
	return out.String()
}

// section is the text of the "## <title>" section of doc.
func section(t *testing.T, doc, title string) string {
	t.Helper()
	start := strings.Index(doc, "\n## "+title+"\n")
	if start < 0 {
		t.Fatalf("docs/commands.md has no section %q", title)
	}
	rest := doc[start+len(title)+5:]
	if end := strings.Index(rest, "\n## "); end >= 0 {
		rest = rest[:end]
	}
	return rest
}

// Every flag each binary's -h lists is in its section of docs/commands.md
// (as `-name`), and every contiv-netctl command of its usage is there too
// (as `contiv-netctl <words>` or `<words>` in code).
func TestEveryCommandAndFlagIsDocumented(t *testing.T) {
	doc := read(t, "docs/commands.md")
	for _, name := range binaries {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			usage := help(t, name)
			text := section(t, doc, name)
			flags := flagLine.FindAllStringSubmatch(usage, -1)
			g.Expect(flags).NotTo(BeEmpty(), "no flag found in %s -h", name)
			for _, f := range flags {
				g.Expect(text).To(ContainSubstring("-"+f[1]), "docs/commands.md ## %s lacks flag -%s", name, f[1])
			}
			if name != "contiv-netctl" {
				return
			}
			commands := usage[strings.Index(usage, "Commands:"):]
			commands = commands[:strings.Index(commands, "\n\n")]
			found := commandLine.FindAllStringSubmatch(commands, -1)
			g.Expect(len(found)).To(BeNumerically(">=", 10), "the commands of contiv-netctl -h")
			for _, c := range found {
				g.Expect(text).To(ContainSubstring(c[1]), "docs/commands.md ## contiv-netctl lacks command %q", c[1])
			}
		})
	}
}

// makeTarget is a target the Makefile documents: "## name: what it does".
var makeTarget = regexp.MustCompile(`(?m)^## ([a-z][a-z0-9-]*):`)

// Every target the Makefile documents with a "## name:" comment has a row
// in docs/commands.md's make targets table.
func TestEveryMakeTargetIsDocumented(t *testing.T) {
	g := NewWithT(t)
	text := section(t, read(t, "docs/commands.md"), "make targets")
	targets := makeTarget.FindAllStringSubmatch(read(t, "Makefile"), -1)
	g.Expect(len(targets)).To(BeNumerically(">=", 10), "the Makefile's ## comments")
	for _, m := range targets {
		g.Expect(text).To(ContainSubstring("`make "+m[1]), "docs/commands.md's make targets lack `make %s`", m[1])
	}
}

// The checks find what is missing: a flag, a command and a target left
// out of a copy of the text.
func TestTheCommandChecksFail(t *testing.T) {
	g := NewWithT(t)
	usage := "Commands:\n  nodes [-o x]   the nodes\n  ipam check [-o table|json]  x\n\nGlobal flags:\n  -etcd endpoints\n    \tthe etcd\n"
	g.Expect(flagLine.FindAllStringSubmatch(usage, -1)).To(ContainElement([]string{"  -etcd", "etcd"}))
	commands := usage[:strings.Index(usage, "\n\n")]
	var words []string
	for _, c := range commandLine.FindAllStringSubmatch(commands, -1) {
		words = append(words, c[1])
	}
	g.Expect(words).To(Equal([]string{"nodes", "ipam check"}))
	g.Expect(makeTarget.FindAllStringSubmatch("## run: the agent\nrun:\n## test-unit: tests\n", -1)).To(HaveLen(2))
}
