package main

import (
	"encoding/json"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/ipam"
)

// Command lines that cannot run: exit 2, the reason and the usage on
// stderr, nothing on stdout, nothing sent.
func TestUsageErrors(t *testing.T) {
	agent := newFakeAgent(t)
	srv := "-server=" + agent.URL
	for _, tc := range []struct {
		name  string
		env   map[string]string
		args  []string
		msg   string // on stderr's first line
		usage string // the usage printed after it
	}{
		{"nothing", nil, nil, "no command given", "Usage: contiv-netctl [global flags] <command>"},
		{"unknown command", nil, []string{"pod"}, `unknown command "pod" (the commands: nodes, pods, ipam, completion)`, "Usage: contiv-netctl [global flags] <command>"},
		{"unknown global flag", nil, []string{"-servr", "x", "ipam"}, "flag provided but not defined: -servr", "Global flags:"},
		{"global flag without value", nil, []string{"-server"}, "flag needs an argument: -server", "Global flags:"},
		{"bad timeout", nil, []string{"-timeout", "soon", "ipam", "checkpoint", "export"}, `invalid value "soon" for flag -timeout`, "Global flags:"},
		{"ipam two nodes", nil, []string{"ipam", "dump", "it"}, `ipam: 2 arguments ["dump" "it"]: want at most one NODE`, "contiv-netctl [global flags] ipam [-o table|wide|json|yaml] [NODE]"},
		{"ipam bad format", nil, []string{srv, "ipam", "-o", "xml"}, `ipam: -o "xml": want table, wide, json or yaml`, "ipam [-o table|wide|json|yaml] [NODE]"},
		{"ipam node bad format", nil, []string{srv, "ipam", "worker-1", "-o", "name"}, `ipam: -o "name": want table, wide, json or yaml`, "ipam [-o table|wide|json|yaml] [NODE]"},
		{"ipam unknown flag", nil, []string{srv, "ipam", "-x"}, "flag provided but not defined: -x", "ipam [-o table|wide|json|yaml] [NODE]"},
		{"bad color", nil, []string{"-color", "pink", "nodes"}, `-color "pink": want auto, always or never`, "Global flags:"},
		{"nodes argument", nil, []string{"nodes", "worker-1"}, `nodes: unexpected argument "worker-1"`, "nodes [-o table|wide|json|yaml|name]"},
		{"nodes bad format", nil, []string{"nodes", "-o", "xml"}, `nodes: -o "xml": want table, wide, json, yaml or name`, "-o format"},
		{"nodes empty etcd", nil, []string{"-etcd", " , ", "nodes"}, `-etcd " , ": no etcd endpoint`, "nodes [-o"},
		{"nodes bad etcd scheme", map[string]string{envEtcd: "ftp://h:1"}, []string{"nodes"}, `env CONTIV_NETCTL_ETCD "ftp://h:1": endpoint "ftp://h:1": want http://host:port`, "nodes [-o"},
		{"nodes etcd without port", map[string]string{envEtcdctl: "h"}, []string{"nodes"}, `env ETCDCTL_ENDPOINTS "h": endpoint "h"`, "nodes [-o"},
		{"nodes etcd cert without key", nil, []string{"-etcd-cert", "c.pem", "nodes"}, "-etcd-cert and -etcd-key go together", "nodes [-o"},
		{"nodes etcd TLS over http", nil, []string{"-etcd", "http://h:1", "-etcd-cacert", "ca.pem", "nodes"}, `-etcd-cacert, -etcd-cert and -etcd-key are for an https:// etcd; -etcd has "http://h:1"`, "nodes [-o"},
		{"pods argument", nil, []string{"pods", "worker-1"}, `pods: unexpected argument "worker-1" (a node goes with -node N)`, "pods [-node N] [-namespace NS]"},
		{"pods bad format", nil, []string{"pods", "-o", "xml"}, `pods: -o "xml": want table, wide, json, yaml or name`, "-namespace namespace"},
		{"pods bad server", nil, []string{"-server", "nowhere", "pods"}, `-server "nowhere"`, "pods [-node N]"},
		{"completion alone", nil, []string{"completion"}, `completion: 0 arguments []: want bash or zsh`, "contiv-netctl completion bash|zsh"},
		{"completion fish", nil, []string{"completion", "fish"}, `completion: shell "fish": want bash or zsh`, "source <(contiv-netctl completion bash)"},
		{"checkpoint alone", nil, []string{"ipam", "checkpoint"}, "ipam checkpoint: no command given (the commands: export, import)", "ipam checkpoint import [-replace] file|-"},
		{"checkpoint unknown", nil, []string{"ipam", "checkpoint", "save"}, `ipam checkpoint: unknown command "save"`, "ipam checkpoint export [-o file]"},
		{"export argument", nil, []string{srv, "ipam", "checkpoint", "export", "out.json"}, `ipam checkpoint export: unexpected argument "out.json"`, "-o file"},
		{"export unknown flag", nil, []string{srv, "ipam", "checkpoint", "export", "-f", "x"}, "flag provided but not defined: -f", "-o file"},
		{"import no file", nil, []string{srv, "ipam", "checkpoint", "import"}, "ipam checkpoint import: no file given (- reads stdin)", "-replace"},
		{"import two files", nil, []string{srv, "ipam", "checkpoint", "import", "a", "b"}, `ipam checkpoint import: 2 arguments ["a" "b"]: want one file`, "-replace"},
		{"import flag after file", nil, []string{srv, "ipam", "checkpoint", "import", "a", "-replace"}, `2 arguments ["a" "-replace"]: want one file (and -replace before it)`, "-replace"},
		{"zero timeout", nil, []string{srv, "-timeout", "0s", "ipam", "checkpoint", "export"}, "-timeout 0s: want a positive duration", "-o file"},
		{"server not http", nil, []string{"-server", "ftp://h:1", "ipam", "checkpoint", "export"}, `-server "ftp://h:1": want http://host:port or https://host:port`, "-o file"},
		{"server without scheme", nil, []string{"-server", "127.0.0.1:9999", "ipam", "checkpoint", "export"}, `-server "127.0.0.1:9999"`, "-o file"},
		{"server with a query", nil, []string{"-server", "http://h:1/?x=1", "ipam", "checkpoint", "export"}, `want no query and no fragment`, "-o file"},
		{"server with credentials", nil, []string{"-server", "http://admin:s3cret@h:1", "ipam", "checkpoint", "export"}, `credentials in the URL: give them with -user or CONTIV_NETCTL_USER`, "-o file"},
		{"bad server from env", map[string]string{envServer: "nowhere"}, []string{"ipam", "checkpoint", "export"}, `env CONTIV_NETCTL_SERVER "nowhere"`, "-o file"},
		{"user without password", nil, []string{srv, "-user", "admin", "ipam", "checkpoint", "export"}, "-user: want user:password (the value is not shown)", "-o file"},
		{"user from env without colon", map[string]string{envUser: "admin"}, []string{srv, "ipam", "checkpoint", "export"}, "env CONTIV_NETCTL_USER: want user:password", "-o file"},
		{"empty user name", nil, []string{srv, "-user", ":pw", "ipam", "checkpoint", "export"}, "-user: want user:password", "-o file"},
		{"cert without key", nil, []string{"-server", "https://h:1", "-cert", "c.pem", "ipam", "checkpoint", "export"}, "-cert and -key go together", "-o file"},
		{"key without cert", nil, []string{"-server", "https://h:1", "-key", "k.pem", "ipam", "checkpoint", "export"}, "-cert and -key go together", "-o file"},
		{"conflicts unknown", nil, []string{srv, "ipam", "conflicts", "purge"}, `ipam conflicts: unknown command "purge" (the commands: list, restore, discard)`, "ipam conflicts restore NAME"},
		{"conflicts flag", nil, []string{srv, "ipam", "conflicts", "-o", "json"}, `ipam conflicts: unknown flag "-o"`, "ipam conflicts [list]"},
		{"conflicts list argument", nil, []string{srv, "ipam", "conflicts", "list", "default/web-0"}, `ipam conflicts list: unexpected argument "default/web-0"`, "ipam conflicts discard NAME"},
		{"restore no name", nil, []string{srv, "ipam", "conflicts", "restore"}, `ipam conflicts restore: no NAME given ("contiv-netctl ipam conflicts" lists them)`, "ipam conflicts restore NAME"},
		{"restore two names", nil, []string{srv, "ipam", "conflicts", "restore", "a/b", "c/d"}, `ipam conflicts restore: 2 arguments ["a/b" "c/d"]: want one NAME`, "ipam conflicts restore NAME"},
		{"discard empty name", nil, []string{srv, "ipam", "conflicts", "discard", ""}, "ipam conflicts discard: the NAME is empty", "ipam conflicts discard NAME"},
		{"discard unknown flag", nil, []string{srv, "ipam", "conflicts", "discard", "-force", "a/b"}, "flag provided but not defined: -force", "ipam conflicts discard NAME"},
		{"restore bad server", nil, []string{"-server", "127.0.0.1:9999", "ipam", "conflicts", "restore", "a/b"}, `-server "127.0.0.1:9999"`, "ipam conflicts restore NAME"},
		{"list user without password", nil, []string{srv, "-user", "admin", "ipam", "conflicts"}, "-user: want user:password", "ipam conflicts [list]"},
		{"check bad format", nil, []string{srv, "ipam", "check", "-o", "yaml"}, `ipam check: -o "yaml": want table or json`, "ipam check [-o table|json]"},
		{"check argument after the flag", nil, []string{srv, "ipam", "check", "-o", "json", "now"}, `ipam check: unexpected argument "now"`, "-o format"},
		{"release without a report", nil, []string{srv, "ipam", "release"}, `ipam release: no report given: want -from-report file (written by "contiv-netctl ipam check -o json")`, "ipam release -from-report file"},
		{"release of a file without the flag", nil, []string{srv, "ipam", "release", "report.json"}, `ipam release: unexpected argument "report.json" (the report goes with -from-report file)`, "-from-report file"},
		{"release flag without file", nil, []string{srv, "ipam", "release", "-from-report"}, "flag needs an argument: -from-report", "-from-report file"},
		{"release unknown flag", nil, []string{srv, "ipam", "release", "-force", "-from-report", "r.json"}, "flag provided but not defined: -force", "-from-report file"},
		{"release user without password", nil, []string{srv, "-user", "admin", "ipam", "release", "-from-report", "r.json"}, "-user: want user:password", "-from-report file"},
		{"TLS flags over http", nil, []string{srv, "-cacert", "ca.pem", "ipam", "checkpoint", "import", "-"}, "-cacert, -cert and -key are for an https:// server", "-replace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			res := netctl(t, tc.env, "", tc.args...)
			g.Expect(res.code).To(Equal(exitUsage), "stderr: %s", res.stderr)
			g.Expect(res.stdout).To(BeEmpty())
			first, rest, _ := strings.Cut(res.stderr, "\n")
			g.Expect(first).To(HavePrefix("contiv-netctl: "))
			g.Expect(first).To(ContainSubstring(tc.msg))
			g.Expect(rest).To(ContainSubstring(tc.usage))
			g.Expect(res.stderr).NotTo(ContainSubstring("s3cret"), "a password is never shown")
		})
	}
	NewWithT(t).Expect(agent.received()).To(BeEmpty(), "nothing was sent")
}

// -h prints the usage of the level it is given at, on stdout, exit 0.
func TestHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"-h"}, []string{"Usage: contiv-netctl [global flags] <command>", "ipam checkpoint export [-o file]",
			"ipam checkpoint import [-replace] file|-", "ipam conflicts [list]", "ipam conflicts restore NAME",
			"ipam conflicts discard NAME", "ipam check [-o table|json]", "ipam release -from-report file", "-server url", "CONTIV_NETCTL_SERVER", "-user user:password",
			"CONTIV_NETCTL_USER", "-cacert file", "-cert file", "-key file", "-timeout duration", "(default 30s)",
			`(default "http://127.0.0.1:9999")`, "Exit codes: 0 done, 1 the command failed (the reason on stderr), 2 usage error."}},
		{[]string{"-help"}, []string{"Usage: contiv-netctl [global flags] <command>"}},
		{[]string{"-h"}, []string{"nodes [-o table|wide|json|yaml|name]", "pods [-node N] [-namespace NS] [-o ...]",
			"ipam [-o table|wide|json|yaml] [NODE]", "completion bash|zsh", "-etcd endpoints", "CONTIV_NETCTL_ETCD", "ETCDCTL_ENDPOINTS",
			`(default "http://127.0.0.1:2379")`, "-etcd-cacert file", "-etcd-cert file", "-etcd-key file", "-color when", "NO_COLOR",
			`(default "auto")`}},
		{[]string{"nodes", "-h"}, []string{"Usage: contiv-netctl [global flags] nodes [-o table|wide|json|yaml|name]", "one transaction",
			"stale", "LEASE", `(default "table")`}},
		{[]string{"pods", "--help"}, []string{"Usage: contiv-netctl [global flags] pods [-node N] [-namespace NS]", "at most 16 at once",
			"-node name", "-namespace namespace", "the exit status is 1"}},
		{[]string{"ipam", "-o", "json", "-h"}, []string{"Usage: contiv-netctl [global flags] ipam [-o table|wide|json|yaml] [NODE]",
			"ipam -- NODE", "[#######.....] 58% 148/254", "red from 90%"}},
		{[]string{"completion", "-h"}, []string{"Usage: contiv-netctl completion bash|zsh", "source <(contiv-netctl completion bash)", "$fpath"}},
		{[]string{"help"}, []string{"Usage: contiv-netctl [global flags] <command>"}},
		{[]string{"ipam", "-h"}, []string{"Usage: contiv-netctl [global flags] ipam [-o table|wide|json|yaml] [NODE]",
			"contiv-netctl [global flags] ipam <command>", "checkpoint export", "conflicts [list]",
			"conflicts restore NAME", "conflicts discard NAME", "check [-o table|json]", "release -from-report file"}},
		{[]string{"ipam", "check", "-h"}, []string{"Usage: contiv-netctl [global flags] ipam check [-o table|json]", "-o format",
			`(default "table")`, "ipam release -from-report file"}},
		{[]string{"ipam", "release", "-h"}, []string{"Usage: contiv-netctl [global flags] ipam release -from-report file",
			"-from-report file", "force=true", "moved", "free", "nothing is released", "Exit 1 if", "give -user, or -cacert with -cert and -key"}},
		{[]string{"ipam", "release", "--help"}, []string{"ipam release -from-report file"}},
		{[]string{"ipam", "checkpoint", "-h"}, []string{"contiv-netctl [global flags] ipam checkpoint export [-o file]",
			"contiv-netctl [global flags] ipam checkpoint import [-replace] file|-", "renamed over file", "-replace"}},
		{[]string{"ipam", "checkpoint", "help"}, []string{"ipam checkpoint export [-o file]"}},
		{[]string{"ipam", "checkpoint", "export", "-h"}, []string{"ipam checkpoint export [-o file]", "-o file", "mode 0600"}},
		{[]string{"ipam", "checkpoint", "import", "-h"}, []string{"ipam checkpoint import [-replace] file|-", "-replace"}},
		{[]string{"ipam", "conflicts", "-h"}, []string{"contiv-netctl [global flags] ipam conflicts [list]",
			"ipam conflicts restore NAME", "ipam conflicts discard NAME", "409 cannot-restore", "give -user, or -cacert with -cert and -key"}},
		{[]string{"ipam", "conflicts", "help"}, []string{"ipam conflicts [list]"}},
		{[]string{"ipam", "conflicts", "restore", "-h"}, []string{"ipam conflicts restore NAME"}},
		{[]string{"ipam", "conflicts", "discard", "-help"}, []string{"ipam conflicts discard NAME"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			g := NewWithT(t)
			res := netctl(t, nil, "", tc.args...)
			g.Expect(res.code).To(Equal(exitOK), res.stderr)
			g.Expect(res.stderr).To(BeEmpty())
			for _, w := range tc.want {
				g.Expect(res.stdout).To(ContainSubstring(w))
			}
		})
	}
}

func TestVersion(t *testing.T) {
	g := NewWithT(t)
	res := netctl(t, nil, "", "-version")
	g.Expect(res.code).To(Equal(exitOK))
	g.Expect(res.stdout).To(Equal("contiv-netctl dev (commit unknown, built unknown)\n"))
}

// The REST path and reply contiv-netctl copies are the agent's.
func TestTheAgentsPathAndReply(t *testing.T) {
	g := NewWithT(t)
	g.Expect(checkpointPath).To(Equal(ipam.CheckpointPath))
	// The same fields (a conversion compiles only then), and the same JSON.
	reply := ipam.CheckpointImport{Imported: 1, Skipped: 2, SkippedReasons: []string{"x"}}
	a, err := json.Marshal(reply)
	g.Expect(err).NotTo(HaveOccurred())
	b, err := json.Marshal(importReply(reply))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).To(Equal(string(a)))
}

// The conflicts paths and the reply shapes contiv-netctl copies are the
// agent's.
func TestTheAgentsConflictsCalls(t *testing.T) {
	g := NewWithT(t)
	g.Expect(conflictsPath).To(Equal(ipam.ConflictsPath))
	g.Expect(restoreConflictPath).To(Equal(ipam.OperatorRestoreConflictPath))
	g.Expect(discardConflictPath).To(Equal(ipam.OperatorDiscardConflictPath))

	reply := ipam.OperatorConflict{Conflict: "a/b", Restored: true, Discarded: true, Detail: "d"}
	a, err := json.Marshal(reply)
	g.Expect(err).NotTo(HaveOccurred())
	b, err := json.Marshal(conflictReply(reply))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).To(Equal(string(a)))

	// Every field of the agent's list decodes into ours, strictly, and
	// encodes back to the same JSON (no conversion: PodID's type is the
	// plugin's).
	list := ipam.Conflicts{Conflicts: []ipam.Conflict{{Name: "n", PodID: ipam.PodName{Name: "p", Namespace: "ns"}, IP: "10.1.1.2",
		IPs: []string{"10.1.1.2", "fd00::2"}, KeptFor: "ns/q", Reason: "r", At: "2026-11-25T14:50:00Z", Key: "k", Value: "v",
		Network: "net", ContainerID: "c", IfName: "eth0"}}}
	a, err = json.Marshal(list)
	g.Expect(err).NotTo(HaveOccurred())
	dec := json.NewDecoder(strings.NewReader(string(a)))
	dec.DisallowUnknownFields()
	var ours conflictList
	g.Expect(dec.Decode(&ours)).To(Succeed())
	b, err = json.Marshal(ours)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).To(Equal(string(a)))
}
