package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// creds are the global flags of a test: the fake agent and a user.
func creds(f *fakeAgent) []string { return []string{"-server", f.URL, "-user", "admin:s3cret"} }

func args(pre []string, rest ...string) []string {
	return append(append([]string(nil), pre...), rest...)
}

// filesIn lists the names in dir.
func filesIn(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

func TestExportToAFile(t *testing.T) {
	g := NewWithT(t)
	f := newFakeAgent(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "node.json")
	g.Expect(os.WriteFile(out, []byte("old"), 0o644)).To(Succeed())

	res := netctl(t, nil, "", args(creds(f), "ipam", "checkpoint", "export", "-o", out)...)
	g.Expect(res.code).To(Equal(exitOK), res.stderr)
	g.Expect(res.stderr).To(BeEmpty())
	g.Expect(res.stdout).To(Equal(`exported 2 allocations of node "worker-1" (taken at 2026-11-25T14:50:00Z) to ` + out + "\n"))
	data, err := os.ReadFile(out)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(data)).To(Equal(sampleDoc), "the document as the agent sent it")
	st, err := os.Stat(out)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Mode().Perm()).To(Equal(os.FileMode(0o600)), "it names every pod of the node")
	g.Expect(filesIn(t, dir)).To(Equal([]string{"node.json"}), "no temporary file left")

	reqs := f.received()
	g.Expect(reqs).To(HaveLen(1))
	g.Expect(reqs[0].method).To(Equal(http.MethodGet))
	g.Expect(reqs[0].path).To(Equal("/contiv/v1/ipam/checkpoint"))
	g.Expect(reqs[0].header.Get("Authorization")).To(Equal(basic("admin", "s3cret")))
}

func TestExportToStdout(t *testing.T) {
	g := NewWithT(t)
	f := newFakeAgent(t)
	env := map[string]string{envServer: f.URL, envUser: "ops:pw:with:colons"}
	for _, a := range [][]string{{"ipam", "checkpoint", "export"}, {"ipam", "checkpoint", "export", "-o", "-"}} {
		res := netctl(t, env, "", a...)
		g.Expect(res.code).To(Equal(exitOK), res.stderr)
		g.Expect(res.stdout).To(Equal(sampleDoc))
		g.Expect(res.stderr).To(Equal(`exported 2 allocations of node "worker-1" (taken at 2026-11-25T14:50:00Z) to stdout` + "\n"))
	}
	reqs := f.received()
	g.Expect(reqs).To(HaveLen(2))
	g.Expect(reqs[0].header.Get("Authorization")).To(Equal(basic("ops", "pw:with:colons")), "the environment's user; a password may hold colons")
}

// A flag wins over its environment variable.
func TestFlagsWinOverTheEnvironment(t *testing.T) {
	g := NewWithT(t)
	f := newFakeAgent(t)
	env := map[string]string{envServer: "http://127.0.0.1:1", envUser: "env:user"}
	res := netctl(t, env, "", args(creds(f), "ipam", "checkpoint", "export")...)
	g.Expect(res.code).To(Equal(exitOK), res.stderr)
	g.Expect(f.received()[0].header.Get("Authorization")).To(Equal(basic("admin", "s3cret")))
}

// When the export fails, the file keeps its old content and no temporary
// file is left; the message names what failed.
func TestExportFailuresLeaveTheFileAlone(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		msg    string
	}{
		{"forbidden", http.StatusForbidden,
			`{"error": "the checkpoint calls reveal and replace every allocation of the node and need client authentication; set client-basic-auth, or client-cert-files with server-cert-file and server-key-file in http.conf", "reason": "forbidden"}`,
			"/contiv/v1/ipam/checkpoint: 403 Forbidden: the checkpoint calls reveal and replace every allocation of the node and need client authentication; set client-basic-auth"},
		{"unauthorized", http.StatusUnauthorized, `{"error": "authentication required"}`,
			"401 Unauthorized: authentication required (the server refused the user and password of -user)"},
		{"not ready", http.StatusServiceUnavailable, `{"error": "IPAM is not initialised yet: no resync processed", "reason": "not-ready"}`,
			"503 Service Unavailable: IPAM is not initialised yet: no resync processed"},
		{"not JSON", http.StatusBadGateway, "<html>proxy error</html>", "502 Bad Gateway: <html>proxy error</html>"},
		{"a bad document", http.StatusOK, `{"version": "contiv-ipam/2", "allocations": [{"ips": ["10.1.1.2"]}]}`,
			"ipam checkpoint export: the agent sent a document this contiv-netctl cannot read; nothing written: invalid checkpoint: allocations[0]: no key"},
		{"not a document", http.StatusOK, `{"Pods": null}`,
			`nothing written: invalid checkpoint: field "version": missing`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			f := newFakeAgent(t)
			f.exportStatus, f.exportBody = tc.status, tc.body
			dir := t.TempDir()
			out := filepath.Join(dir, "node.json")
			g.Expect(os.WriteFile(out, []byte("old"), 0o644)).To(Succeed())
			res := netctl(t, nil, "", args(creds(f), "ipam", "checkpoint", "export", "-o", out)...)
			g.Expect(res.code).To(Equal(exitError))
			g.Expect(res.stdout).To(BeEmpty())
			g.Expect(res.stderr).To(HavePrefix("contiv-netctl: ipam checkpoint export: "))
			g.Expect(res.stderr).To(ContainSubstring(tc.msg))
			g.Expect(strings.Count(res.stderr, "\n")).To(Equal(1), "one line, no usage")
			data, err := os.ReadFile(out)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(data)).To(Equal("old"))
			g.Expect(filesIn(t, dir)).To(Equal([]string{"node.json"}))
		})
	}
}

// 401 without -user says how to give one.
func TestUnauthorizedWithoutAUserSaysHow(t *testing.T) {
	g := NewWithT(t)
	f := newFakeAgent(t)
	f.exportStatus, f.exportBody = http.StatusUnauthorized, `{"error": "authentication required"}`
	res := netctl(t, nil, "", "-server", f.URL, "ipam", "checkpoint", "export")
	g.Expect(res.code).To(Equal(exitError))
	g.Expect(res.stderr).To(ContainSubstring("401 Unauthorized: authentication required (the server wants basic authentication: give -user user:password or set CONTIV_NETCTL_USER)"))
	g.Expect(f.received()[0].header.Get("Authorization")).To(BeEmpty())
}

// A document of a newer format is saved, with a warning that this
// contiv-netctl cannot import it.
func TestExportOfANewerDocumentWarns(t *testing.T) {
	g := NewWithT(t)
	f := newFakeAgent(t)
	f.exportBody = `{"version": "contiv-ipam/3", "allocations": [], "shards": 2}`
	out := filepath.Join(t.TempDir(), "node.json")
	res := netctl(t, nil, "", args(creds(f), "ipam", "checkpoint", "export", "-o", out)...)
	g.Expect(res.code).To(Equal(exitOK), res.stderr)
	g.Expect(res.stderr).To(Equal("contiv-netctl: warning: wrote the document to " + out + `, but this contiv-netctl cannot import it: ` +
		`checkpoint written by a newer version of the format: version "contiv-ipam/3"; this code reads up to "contiv-ipam/2"` + "\n"))
	data, err := os.ReadFile(out)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(data)).To(Equal(f.exportBody))
}

func TestExportIntoAMissingDirectory(t *testing.T) {
	g := NewWithT(t)
	f := newFakeAgent(t)
	out := filepath.Join(t.TempDir(), "nope", "node.json")
	res := netctl(t, nil, "", args(creds(f), "ipam", "checkpoint", "export", "-o", out)...)
	g.Expect(res.code).To(Equal(exitError))
	g.Expect(res.stderr).To(HavePrefix("contiv-netctl: ipam checkpoint export: writing " + out + ": "))
	g.Expect(res.stderr).To(ContainSubstring("no such file or directory"))
}

func TestServerUnreachable(t *testing.T) {
	g := NewWithT(t)
	f := newFakeAgent(t)
	url := f.URL
	f.Close()
	res := netctl(t, nil, "", "-server", url, "ipam", "checkpoint", "export")
	g.Expect(res.code).To(Equal(exitError))
	g.Expect(res.stderr).To(HavePrefix("contiv-netctl: ipam checkpoint export: GET " + url + "/contiv/v1/ipam/checkpoint: server unreachable: dial tcp "))
	g.Expect(res.stderr).To(ContainSubstring("connection refused"))

	doc := filepath.Join(t.TempDir(), "doc.json")
	g.Expect(os.WriteFile(doc, []byte(sampleDoc), 0o600)).To(Succeed())
	res = netctl(t, nil, "", "-server", url, "ipam", "checkpoint", "import", doc)
	g.Expect(res.code).To(Equal(exitError))
	g.Expect(res.stderr).To(ContainSubstring(`ipam checkpoint import: ` + doc + ` (2 allocations of node "worker-1"): POST ` + url +
		`/contiv/v1/ipam/checkpoint?replace=false: server unreachable`))
}

func TestTimeout(t *testing.T) {
	g := NewWithT(t)
	f := newFakeAgent(t)
	f.delay = 5 * time.Second
	start := time.Now()
	res := netctl(t, nil, "", "-server", f.URL, "-timeout", "100ms", "ipam", "checkpoint", "export")
	g.Expect(res.code).To(Equal(exitError))
	g.Expect(res.stderr).To(ContainSubstring("/contiv/v1/ipam/checkpoint: no reply within -timeout 100ms"))
	g.Expect(time.Since(start)).To(BeNumerically("<", 3*time.Second))
}

func TestImportAFile(t *testing.T) {
	g := NewWithT(t)
	f := newFakeAgent(t)
	f.importBody = `{"imported": 1, "skipped": 1, "skippedReasons": ["allocations[1]: ip 10.1.1.3: not in a pod subnet of this node (10.2.0.0/24)"]}`
	doc := filepath.Join(t.TempDir(), "doc.json")
	g.Expect(os.WriteFile(doc, []byte(sampleDoc), 0o600)).To(Succeed())

	res := netctl(t, nil, "", args(creds(f), "ipam", "checkpoint", "import", doc)...)
	g.Expect(res.code).To(Equal(exitOK), res.stderr)
	g.Expect(res.stderr).To(BeEmpty())
	g.Expect(res.stdout).To(Equal(`imported 1 allocations, skipped 1 (from ` + doc + `: 2 allocations of node "worker-1", taken at 2026-11-25T14:50:00Z)` + "\n" +
		"skipped: allocations[1]: ip 10.1.1.3: not in a pod subnet of this node (10.2.0.0/24)\n"))
	reqs := f.received()
	g.Expect(reqs).To(HaveLen(1))
	g.Expect(reqs[0].method).To(Equal(http.MethodPost))
	g.Expect(reqs[0].path).To(Equal("/contiv/v1/ipam/checkpoint"))
	g.Expect(reqs[0].query).To(Equal("replace=false"))
	g.Expect(reqs[0].header.Get("Content-Type")).To(Equal("application/json"))
	g.Expect(reqs[0].header.Get("Authorization")).To(Equal(basic("admin", "s3cret")))
	g.Expect(reqs[0].body).To(Equal(sampleDoc), "the file as it is")
}

func TestImportFromStdinWithReplace(t *testing.T) {
	g := NewWithT(t)
	f := newFakeAgent(t)
	res := netctl(t, nil, sampleDoc, args(creds(f), "ipam", "checkpoint", "import", "-replace", "-")...)
	g.Expect(res.code).To(Equal(exitOK), res.stderr)
	g.Expect(res.stdout).To(HavePrefix(`imported 2 allocations, skipped 0 (from stdin: 2 allocations of node "worker-1"`))
	g.Expect(f.received()[0].query).To(Equal("replace=true"))
}

// A bad or newer document is refused before anything is sent.
func TestImportRefusesABadDocumentLocally(t *testing.T) {
	for _, tc := range []struct{ name, doc, msg string }{
		{"garbage", "garbage", "invalid checkpoint: the document: invalid JSON"},
		{"empty", "", "invalid checkpoint: the document: want a JSON object, got nothing"},
		{"bad entry", `{"version": "contiv-ipam/2", "allocations": [{"owner": "o", "seq": 1, "ips": ["10.1.1.300"]}]}`,
			`invalid checkpoint: allocations[0]: field "ips[0]": "10.1.1.300" is not an IP address; nothing sent`},
		{"newer", `{"version": "contiv-ipam/4", "allocations": []}`,
			`checkpoint written by a newer version of the format: version "contiv-ipam/4"; this code reads up to "contiv-ipam/2"; nothing sent`},
		{"another format", `{"version": "vpc-cni-ipam/1", "allocations": []}`, `"vpc-cni-ipam/1" is not a version of this format`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			f := newFakeAgent(t)
			doc := filepath.Join(t.TempDir(), "doc.json")
			g.Expect(os.WriteFile(doc, []byte(tc.doc), 0o600)).To(Succeed())
			res := netctl(t, nil, "", args(creds(f), "ipam", "checkpoint", "import", doc)...)
			g.Expect(res.code).To(Equal(exitError))
			g.Expect(res.stderr).To(HavePrefix("contiv-netctl: ipam checkpoint import: " + doc + ": "))
			g.Expect(res.stderr).To(ContainSubstring(tc.msg))
			g.Expect(f.received()).To(BeEmpty())
		})
	}
}

func TestImportOfAMissingOrHugeFile(t *testing.T) {
	g := NewWithT(t)
	f := newFakeAgent(t)
	missing := filepath.Join(t.TempDir(), "missing.json")
	res := netctl(t, nil, "", args(creds(f), "ipam", "checkpoint", "import", missing)...)
	g.Expect(res.code).To(Equal(exitError))
	g.Expect(res.stderr).To(Equal("contiv-netctl: ipam checkpoint import: open " + missing + ": no such file or directory\n"))

	res = netctl(t, nil, strings.Repeat(" ", maxDocument+1), args(creds(f), "ipam", "checkpoint", "import", "-")...)
	g.Expect(res.code).To(Equal(exitError))
	g.Expect(res.stderr).To(Equal("contiv-netctl: ipam checkpoint import: stdin: longer than 16777216 bytes, the most an agent imports\n"))
	g.Expect(f.received()).To(BeEmpty())
}

// The agent's refusals are reported with its message.
func TestImportRefusedByTheAgent(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		msg    string
	}{
		{"not empty", http.StatusConflict,
			`{"error": "importing a checkpoint: 3 allocations held: the node holds allocations: import with replace to drop them", "reason": "not-empty"}`,
			"409 Conflict: importing a checkpoint: 3 allocations held: the node holds allocations: import with replace to drop them"},
		{"forbidden", http.StatusForbidden, `{"error": "the checkpoint calls ... need client authentication", "reason": "forbidden"}`,
			"403 Forbidden: the checkpoint calls ... need client authentication"},
		{"newer", http.StatusConflict, `{"error": "checkpoint written by a newer version of the format: ...", "reason": "newer-version"}`,
			"409 Conflict: checkpoint written by a newer version of the format: ..."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			f := newFakeAgent(t)
			f.importStatus, f.importBody = tc.status, tc.body
			res := netctl(t, nil, sampleDoc, args(creds(f), "ipam", "checkpoint", "import", "-")...)
			g.Expect(res.code).To(Equal(exitError))
			g.Expect(res.stdout).To(BeEmpty())
			g.Expect(res.stderr).To(HavePrefix(`contiv-netctl: ipam checkpoint import: stdin (2 allocations of node "worker-1"): POST ` + f.URL + "/contiv/v1/ipam/checkpoint?replace=false: "))
			g.Expect(res.stderr).To(ContainSubstring(tc.msg))
		})
	}
}

// A server prefix in -server is kept.
func TestServerWithAPathPrefix(t *testing.T) {
	g := NewWithT(t)
	f := newFakeAgent(t)
	res := netctl(t, nil, "", "-server", f.URL+"/agent/", "ipam", "checkpoint", "export")
	g.Expect(res.code).To(Equal(exitError), "the fake serves no prefix")
	g.Expect(f.received()[0].path).To(Equal("/agent/contiv/v1/ipam/checkpoint"))
}
