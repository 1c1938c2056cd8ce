package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// fakeNetctl is a stand-in for the contiv-netctl binary that the
// completion scripts call for node names: it records its arguments in
// args.log and answers "nodes -o name" with two nodes.
const fakeNetctl = `#!/bin/sh
echo "$*" >> "$(dirname "$0")/args.log"
case "$*" in
*"nodes -o name") printf 'worker-1\nworker-2\n' ;;
*) exit 2 ;;
esac
`

// completionScript writes the script of shell and the fake binary into
// a temporary directory.
func completionScript(t *testing.T, shell string) (script, bin string) {
	t.Helper()
	res := netctl(t, nil, "", "completion", shell)
	if res.code != exitOK || res.stderr != "" {
		t.Fatalf("completion %s: exit %d: %s", shell, res.code, res.stderr)
	}
	dir := t.TempDir()
	script, bin = filepath.Join(dir, "completion."+shell), filepath.Join(dir, "fake-netctl")
	if err := os.WriteFile(script, []byte(res.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte(fakeNetctl), 0o755); err != nil {
		t.Fatal(err)
	}
	return script, bin
}

// The bash script in real bash: COMP_WORDS and COMP_CWORD (and
// COMP_LINE where a case sets it), then the completion function; the
// replies are COMPREPLY.
func TestBashCompletion(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	script, bin := completionScript(t, "bash")
	out, err := exec.Command(bash, "-n", script).CombinedOutput()
	NewWithT(t).Expect(err).NotTo(HaveOccurred(), "bash -n: %s", out)
	for _, tc := range []struct {
		name  string
		words []string // COMP_WORDS; the last is the word completed
		line  string   // COMP_LINE, if set
		want  []string
		// called is what the fake binary must have been called with.
		called string
	}{
		{name: "commands", words: []string{""}, want: []string{"nodes", "pods", "ipam", "completion", "help"}},
		{name: "command prefix", words: []string{"p"}, want: []string{"pods"}},
		{name: "global flags", words: []string{"-etcd"}, want: []string{"-etcd", "-etcd-cacert", "-etcd-cert", "-etcd-key"}},
		{name: "after a global flag", words: []string{"-server", "http://h:1", "n"}, want: []string{"nodes"}},
		{name: "color values", words: []string{"-color", "a"}, want: []string{"auto", "always"}},
		{name: "nodes -o", words: []string{"nodes", "-o", ""}, want: []string{"table", "wide", "json", "yaml", "name"}},
		{name: "nodes flags", words: []string{"nodes", "-"}, want: []string{"-o"}},
		{name: "pods flags", words: []string{"pods", "-n"}, want: []string{"-node", "-namespace"}},
		{name: "pods -node", words: []string{"-etcd", "http://e:2379", "pods", "-node", "w"}, want: []string{"worker-1", "worker-2"},
			called: "-etcd http://e:2379 nodes -o name"},
		{name: "pods --node", words: []string{"pods", "--node", "worker-2"}, want: []string{"worker-2"}, called: "nodes -o name"},
		{name: "ipam commands and nodes", words: []string{"ipam", ""},
			want: []string{"check", "checkpoint", "conflicts", "release", "worker-1", "worker-2"}, called: "nodes -o name"},
		{name: "ipam prefix", words: []string{"ipam", "ch"}, want: []string{"check", "checkpoint"}},
		{name: "ipam -o", words: []string{"ipam", "-o", "y"}, want: []string{"yaml"}},
		{name: "ipam NODE -o", words: []string{"ipam", "worker-1", "-"}, want: []string{"-o"}},
		{name: "ipam check -o", words: []string{"ipam", "check", "-o", ""}, want: []string{"table", "json"}},
		{name: "ipam release", words: []string{"ipam", "release", "-"}, want: []string{"-from-report"}},
		{name: "checkpoint", words: []string{"ipam", "checkpoint", ""}, want: []string{"export", "import"}},
		{name: "import flags", words: []string{"ipam", "checkpoint", "import", "-"}, want: []string{"-from", "-replace"}},
		{name: "import formats", words: []string{"ipam", "checkpoint", "import", "-from", ""}, want: []string{"contiv", "aws-vpc-cni"}},
		{name: "conflicts", words: []string{"ipam", "conflicts", ""}, want: []string{"list", "restore", "discard"}},
		{name: "completion", words: []string{"completion", ""}, want: []string{"bash", "zsh"}},
		{name: "-o=value split by bash", words: []string{"nodes", "-o", "=", "j"}, line: "fake-netctl nodes -o=j", want: []string{"json"}},
		{name: "URL with colons on the line", words: []string{"-server", "http", ":", "//h", ":", "1", "pods", "-o", "w"},
			line: "fake-netctl -server http://h:1 pods -o w", want: []string{"wide"}},
		{name: "line ends in a blank", words: []string{"completion", ""}, line: "fake-netctl completion ", want: []string{"bash", "zsh"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			log := filepath.Join(filepath.Dir(bin), "args.log")
			_ = os.Remove(log)
			words := append([]string{bin}, tc.words...)
			setLine := ""
			if tc.line != "" {
				line := strings.Replace(tc.line, "fake-netctl", bin, 1)
				setLine = `COMP_LINE='` + line + `'; COMP_POINT=${#COMP_LINE};`
			}
			cmd := exec.Command(bash, append([]string{"-c", `source "$0"; COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); ` + setLine +
				` _contiv_netctl; printf '%s\n' "${COMPREPLY[@]}"`, script}, words...)...)
			cmd.Env = []string{"PATH=/usr/bin:/bin"}
			out, err := cmd.CombinedOutput()
			g.Expect(err).NotTo(HaveOccurred(), "%s", out)
			got := strings.Fields(string(out))
			g.Expect(got).To(Equal(tc.want))
			if tc.called != "" {
				data, err := os.ReadFile(log)
				g.Expect(err).NotTo(HaveOccurred(), "the binary was not called for node names")
				g.Expect(strings.TrimSpace(string(data))).To(Equal(tc.called))
			}
		})
	}
}

// The zsh script: its structure, then zsh -n and a completion run in zsh
// (make test-deps installs zsh: completion-deps). Without zsh (a bare go
// test run) it fails, unless CONTIV_NO_ZSH=1 says to check the structure
// alone.
func TestZshCompletion(t *testing.T) {
	g := NewWithT(t)
	script, _ := completionScript(t, "zsh")
	data, err := os.ReadFile(script)
	g.Expect(err).NotTo(HaveOccurred())
	s := string(data)
	g.Expect(s).To(HavePrefix("#compdef contiv-netctl\n"))
	g.Expect(s).To(ContainSubstring("compdef _contiv_netctl contiv-netctl"))
	g.Expect(s).To(ContainSubstring("(nodes|pods) list=(table wide json yaml name)"))
	g.Expect(s).To(ContainSubstring("list=(nodes pods ipam completion help)"))
	g.Expect(s).To(ContainSubstring("list=(check checkpoint conflicts release "))
	g.Expect(regexp.MustCompile(`@[A-Z_]+@`).FindAllString(s, -1)).To(BeEmpty(), "every placeholder replaced")
	for _, pair := range [][2]string{{`\bif\b`, `\bfi\b`}, {`\bcase\b`, `\besac\b`}, {`\{\s*$`, `^\s*\}`}} {
		open := regexp.MustCompile(`(?m)`+pair[0]).FindAllString(s, -1)
		closed := regexp.MustCompile(`(?m)`+pair[1]).FindAllString(s, -1)
		g.Expect(open).To(HaveLen(len(closed)), "%s and %s balance", pair[0], pair[1])
	}
	zsh, err := exec.LookPath("zsh")
	if err != nil {
		if os.Getenv("CONTIV_NO_ZSH") == "1" {
			t.Log("CONTIV_NO_ZSH=1: the zsh script's syntax is not checked")
			return
		}
		t.Fatal("no zsh to check the zsh completion with: make completion-deps (apt-get install zsh), or CONTIV_NO_ZSH=1 to skip the zsh run")
	}
	out, err := exec.Command(zsh, "-n", script).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "zsh -n: %s", out)
	// Loaded by compinit as an autoloaded function, it completes: run it
	// in a zsh with a stub compadd that prints the candidates.
	cmd := exec.Command(zsh, "-f", "-c", `compadd() { [[ $1 == -- ]] && shift; print -l -- "$@"; }; compdef() { :; }; `+
		`source "$0"; words=(contiv-netctl nodes -o ""); CURRENT=4; _contiv_netctl`, script)
	out, err = cmd.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	g.Expect(strings.Fields(string(out))).To(Equal([]string{"table", "wide", "json", "yaml", "name"}))
}
