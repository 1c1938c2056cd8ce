package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	. "github.com/onsi/gomega"
)

// root is the repository root, two levels above this package.
const root = "../.."

// maxReadmeLines bounds README.md: the entry point, not the reference.
const maxReadmeLines = 400

// page is one documentation file: its path relative to the root and text.
type page struct {
	rel  string
	text string
}

// pages are README.md and every docs/*.md.
func pages(t *testing.T) []page {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatal("no docs/*.md")
	}
	rels := []string{"README.md"}
	for _, n := range names {
		rels = append(rels, "docs/"+filepath.Base(n))
	}
	var ps []page
	for _, rel := range rels {
		ps = append(ps, page{rel: rel, text: read(t, rel)})
	}
	return ps
}

func read(t *testing.T, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestReadmeIsShort(t *testing.T) {
	text := read(t, "README.md")
	n := strings.Count(text, "\n")
	if !strings.HasSuffix(text, "\n") {
		n++
	}
	if n > maxReadmeLines {
		t.Errorf("README.md has %d lines, want at most %d: move the reference to docs/", n, maxReadmeLines)
	}
}

// prose is a page's text outside fenced code blocks, line by line (a
// fenced line is empty), with inline code spans blanked: links and
// headings are only read there.
func prose(text string) []string {
	var out []string
	fence := ""
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case fence == "" && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")):
			fence = trimmed[:3]
			out = append(out, "")
			continue
		case fence != "":
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			out = append(out, "")
			continue
		}
		out = append(out, codeSpan.ReplaceAllStringFunc(line, func(s string) string {
			return strings.Repeat("x", len(s))
		}))
	}
	return out
}

var (
	codeSpan = regexp.MustCompile("`[^`]*`")
	heading  = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	link     = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	inLink   = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// anchors are the GitHub anchors of a page's headings (duplicates get -1,
// -2, ...).
func anchors(text string) map[string]bool {
	set := map[string]bool{}
	seen := map[string]int{}
	fence := ""
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if fence == "" && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")) {
			fence = trimmed[:3]
			continue
		}
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		m := heading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		s := slug(m[2])
		if n := seen[s]; n > 0 {
			set[s+"-"+itoa(n)] = true
		} else {
			set[s] = true
		}
		seen[s]++
	}
	return set
}

// slug is GitHub's anchor of a heading: link syntax reduced to its text,
// lower case, every character but letters, digits, spaces, '-' and '_'
// dropped, spaces turned into '-'.
func slug(h string) string {
	h = inLink.ReplaceAllString(h, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func itoa(n int) string {
	const digits = "0123456789"
	if n < 10 {
		return digits[n : n+1]
	}
	return itoa(n/10) + digits[n%10:n%10+1]
}

func TestSlug(t *testing.T) {
	g := NewWithT(t)
	for h, want := range map[string]string{
		"Release only on evidence":                               "release-only-on-evidence",
		"Node pod-CIDR allocation (node IPAM)":                   "node-pod-cidr-allocation-node-ipam",
		"http.conf — the REST server (plugin `http`)":            "httpconf--the-rest-server-plugin-http",
		"ksr.conf — contiv-ksr's reflector (plugin `ksr`)":       "ksrconf--contiv-ksrs-reflector-plugin-ksr",
		"Cluster simulation: `make sim`":                         "cluster-simulation-make-sim",
		"End-to-end tests and `make demo`":                       "end-to-end-tests-and-make-demo",
		"Dual stack, reservations and Cilium's allocation calls": "dual-stack-reservations-and-ciliums-allocation-calls",
		"See [the index](README.md)":                             "see-the-index",
	} {
		g.Expect(slug(h)).To(Equal(want), "slug(%q)", h)
	}
	g.Expect(anchors("# A\n## A\n```\n# B\n```\n### A\n")).To(Equal(map[string]bool{"a": true, "a-1": true, "a-2": true}))
}

// TestLinksResolve checks every relative link of README.md and docs/*.md:
// the file exists (inside the repository), and an #anchor names a heading
// of the markdown page it points at.
func TestLinksResolve(t *testing.T) {
	absRoot, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	anchorCache := map[string]map[string]bool{}
	checked := 0
	for _, p := range pages(t) {
		dir := filepath.Dir(p.rel)
		for i, line := range prose(p.text) {
			for _, m := range link.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				where := p.rel + ":" + itoa(i+1) + ": " + m[0]
				file, anchor, _ := strings.Cut(target, "#")
				rel := p.rel
				if file != "" {
					rel = filepath.ToSlash(filepath.Join(dir, file))
					abs := filepath.Join(absRoot, filepath.FromSlash(rel))
					if !strings.HasPrefix(abs, absRoot+string(filepath.Separator)) {
						t.Errorf("%s: %s is outside the repository", where, target)
						continue
					}
					if _, err := os.Stat(abs); err != nil {
						t.Errorf("%s: %s does not exist", where, rel)
						continue
					}
				}
				if anchor == "" || !strings.HasSuffix(rel, ".md") {
					continue
				}
				set, ok := anchorCache[rel]
				if !ok {
					set = anchors(read(t, rel))
					anchorCache[rel] = set
				}
				if !set[anchor] {
					t.Errorf("%s: %s has no heading #%s", where, rel, anchor)
				}
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d relative links found: is the link pattern still right?", checked)
	}
}

// issueNumber matches the ways a page could name an issue or pull request
// by number: "issue 12", "issues #3", "#14", "PR 7", "cilium#29443".
var issueNumber = regexp.MustCompile(`(?i)\b(?:issues?|pr|pull request)\s*#?\s*[0-9]+\b|(?:^|[^&\w/])#[0-9]+\b|\w#[0-9]+\b`)

func TestNoIssueNumbers(t *testing.T) {
	g := NewWithT(t)
	for _, s := range []string{"(issue 12)", "issue #4", "Issues 3", "see #14", "cilium#29443", "PR 7"} {
		g.Expect(issueNumber.MatchString(s)).To(BeTrue(), s)
	}
	for _, s := range []string{"block 256", "[x](#node-ids)", "&#8212;", "code 11", "`/24`"} {
		g.Expect(issueNumber.MatchString(s)).To(BeFalse(), s)
	}
	for _, p := range pages(t) {
		for i, line := range strings.Split(p.text, "\n") {
			if m := issueNumber.FindString(line); m != "" {
				t.Errorf("%s:%d names an issue number (%q): speak of the feature instead", p.rel, i+1, strings.TrimSpace(m))
			}
		}
	}
}

// TestEveryPageIsIndexed checks that docs/README.md and README.md link
// every page of docs/.
func TestEveryPageIsIndexed(t *testing.T) {
	index := read(t, "docs/README.md")
	readme := read(t, "README.md")
	for _, p := range pages(t) {
		if p.rel == "README.md" || p.rel == "docs/README.md" {
			continue
		}
		name := filepath.Base(p.rel)
		if !strings.Contains(index, "]("+name+")") {
			t.Errorf("docs/README.md does not link %s", name)
		}
		if !strings.Contains(readme, "]("+p.rel+")") {
			t.Errorf("README.md does not link %s (what to read next)", p.rel)
		}
	}
	if !strings.Contains(readme, "](docs/README.md)") {
		t.Error("README.md does not link the index docs/README.md")
	}
}

// TestConfigurationStatesTheLookupOrder checks that docs/configuration.md
// states the order infra/config's TestLookupOrder pins: the flag, else the
// env variable, else the file in the config directory (-config-dir, else
// CONFIG_DIR, else the working directory).
func TestConfigurationStatesTheLookupOrder(t *testing.T) {
	doc := read(t, "docs/configuration.md")
	steps := []string{
		"1. the flag `-<plugin>-config <file>`",
		"2. the environment variable `<PLUGIN>_CONFIG`",
		"3. `<plugin>.conf` in the config directory: `-config-dir`, else `CONFIG_DIR`, else the",
	}
	at := 0
	for _, s := range steps {
		i := strings.Index(doc[at:], s)
		if i < 0 {
			t.Fatalf("docs/configuration.md does not state, after the steps before it, %q", s)
		}
		at += i + len(s)
	}
	if !strings.Contains(doc, "Only one place is searched.") {
		t.Error("docs/configuration.md no longer says that only one place is searched")
	}
}
