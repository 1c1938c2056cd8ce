package main

import (
	"net/http"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// The records moved aside, as a table, from the agent's reply; "list"
// is the default.
func TestConflictsList(t *testing.T) {
	want := `NAME                     POD            IPS                      KEPT-FOR   AT                    REASON
default/web-0            default/web-0  9.9.9.9                  -          2026-11-25T14:50:00Z  9.9.9.9 is not in a pod subnet or pool of this node (10.1.1.0/24)
attachments/net/c2/eth0  prod/db-1      10.1.1.7,fd00:10:1:1::7  prod/db-0  2026-11-25T14:51:02Z  10.1.1.7 is held by prod/db-0
`
	for _, cmd := range [][]string{{"ipam", "conflicts"}, {"ipam", "conflicts", "list"}} {
		t.Run(strings.Join(cmd, " "), func(t *testing.T) {
			g := NewWithT(t)
			f := newFakeAgent(t)
			res := netctl(t, nil, "", args(creds(f), cmd...)...)
			g.Expect(res.code).To(Equal(exitOK), res.stderr)
			g.Expect(res.stderr).To(BeEmpty())
			g.Expect(res.stdout).To(Equal(want))
			reqs := f.received()
			g.Expect(reqs).To(HaveLen(1))
			g.Expect(reqs[0].method).To(Equal(http.MethodGet))
			g.Expect(reqs[0].path).To(Equal("/contiv/v1/ipam/conflicts"))
			g.Expect(reqs[0].header.Get("Authorization")).To(Equal(basic("admin", "s3cret")))
		})
	}
}

func TestConflictsListEmptyAndOdd(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
	}{
		{"none", `{"conflicts": []}`, "no conflicts: every stored allocation record was placed\n"},
		{"null", `{"conflicts": null}`, "no conflicts: every stored allocation record was placed\n"},
		// A value the agent could not decode is shown in ip; a tab or a
		// line break in a cell does not break the table.
		{"unreadable", `{"conflicts": [{"name": "x/y", "PodID": {"Name": "y", "Namespace": "x"}, "ip": "unreadable: a\tb\nc", "at": ""}]}`,
			"NAME  POD  IPS                KEPT-FOR  AT  REASON\nx/y   x/y  unreadable: a b c  -         -   -\n"},
		// Fields an older contiv-netctl does not know are let be.
		{"newer fields", `{"conflicts": [{"name": "x/y", "PodID": {"Name": "y", "Namespace": "x"}, "ip": "10.1.1.2", "at": "t", "keptFor": "x/z", "reason": "r", "newField": 1}], "more": true}`,
			"NAME  POD  IPS       KEPT-FOR  AT  REASON\nx/y   x/y  10.1.1.2  x/z       t   r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			f := newFakeAgent(t)
			f.reply(http.MethodGet, conflictsPath, http.StatusOK, tc.body)
			res := netctl(t, map[string]string{envServer: f.URL}, "", "ipam", "conflicts")
			g.Expect(res.code).To(Equal(exitOK), res.stderr)
			g.Expect(res.stdout).To(Equal(tc.want))
			g.Expect(f.received()[0].header.Get("Authorization")).To(BeEmpty(), "no -user: no credentials")
		})
	}
}

func TestConflictsListFailures(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		msg    string
	}{
		{"store failure", http.StatusInternalServerError, `{"error": "reading /contiv-agent/ipam/conflicts/: bolt: closed"}`,
			"500 Internal Server Error: reading /contiv-agent/ipam/conflicts/: bolt: closed\n"},
		{"older agent", http.StatusNotFound, "404 page not found",
			"404 Not Found: 404 page not found (the agent does not serve this call: it is older than the conflicts calls)\n"},
		{"unauthorized", http.StatusUnauthorized, `{"error": "authentication required"}`,
			"401 Unauthorized: authentication required (the server refused the user and password of -user)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			f := newFakeAgent(t)
			f.reply(http.MethodGet, conflictsPath, tc.status, tc.body)
			res := netctl(t, nil, "", args(creds(f), "ipam", "conflicts")...)
			g.Expect(res.code).To(Equal(exitError))
			g.Expect(res.stdout).To(BeEmpty())
			g.Expect(res.stderr).To(Equal("contiv-netctl: ipam conflicts: GET " + f.URL + "/contiv/v1/ipam/conflicts: " + tc.msg))
		})
	}
	t.Run("not JSON", func(t *testing.T) {
		g := NewWithT(t)
		f := newFakeAgent(t)
		f.reply(http.MethodGet, conflictsPath, http.StatusOK, "<html>")
		res := netctl(t, nil, "", args(creds(f), "ipam", "conflicts")...)
		g.Expect(res.code).To(Equal(exitError))
		g.Expect(res.stderr).To(HavePrefix(`contiv-netctl: ipam conflicts: the agent's reply "<html>": invalid character`))
	})
	t.Run("unreachable", func(t *testing.T) {
		g := NewWithT(t)
		res := netctl(t, nil, "", "-server", "http://127.0.0.1:1", "ipam", "conflicts")
		g.Expect(res.code).To(Equal(exitError))
		g.Expect(res.stderr).To(ContainSubstring("ipam conflicts: GET http://127.0.0.1:1/contiv/v1/ipam/conflicts: server unreachable"))
	})
}

// restore and discard send {"conflict": NAME} as JSON with the
// credentials, and print what the agent did.
func TestConflictRestoreAndDiscard(t *testing.T) {
	for _, tc := range []struct {
		verb, path, want string
	}{
		{"restore", "/contiv/v1/ipam/operator/conflicts/restore",
			`restored conflict "default/web-0": default/web-0 of pod default/web-0 holds 10.1.1.9 again` + "\n"},
		{"discard", "/contiv/v1/ipam/operator/conflicts/discard", `discarded conflict "default/web-0"` + "\n"},
	} {
		t.Run(tc.verb, func(t *testing.T) {
			g := NewWithT(t)
			f := newFakeAgent(t)
			env := map[string]string{envServer: f.URL, envUser: "ops:pw"}
			res := netctl(t, env, "", "ipam", "conflicts", tc.verb, "default/web-0")
			g.Expect(res.code).To(Equal(exitOK), res.stderr)
			g.Expect(res.stderr).To(BeEmpty())
			g.Expect(res.stdout).To(Equal(tc.want))
			reqs := f.received()
			g.Expect(reqs).To(HaveLen(1))
			g.Expect(reqs[0].method).To(Equal(http.MethodPost))
			g.Expect(reqs[0].path).To(Equal(tc.path))
			g.Expect(reqs[0].query).To(BeEmpty())
			g.Expect(reqs[0].header.Get("Content-Type")).To(Equal("application/json"))
			g.Expect(reqs[0].header.Get("Authorization")).To(Equal(basic("ops", "pw")))
			g.Expect(reqs[0].body).To(MatchJSON(`{"conflict": "default/web-0"}`))
		})
	}
	t.Run("a name to escape", func(t *testing.T) {
		g := NewWithT(t)
		f := newFakeAgent(t)
		name := `attachments/net/c"2/eth0`
		res := netctl(t, nil, "", args(creds(f), "ipam", "conflicts", "discard", name)...)
		g.Expect(res.code).To(Equal(exitOK), res.stderr)
		g.Expect(f.received()[0].body).To(MatchJSON(`{"conflict": "attachments/net/c\"2/eth0"}`))
	})
}

// Each refusal of the agent: exit 1, one line naming the conflict, the
// server's status, message and reason, and what the reason means.
func TestConflictRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		verb   string
		status int
		body   string
		user   bool
		msg    string
	}{
		{"no such conflict", "discard", http.StatusNotFound,
			`{"error": "conflict \"default/web-0\": no record moved aside under that name", "reason": "no-such-conflict"}`, true,
			`404 Not Found: conflict "default/web-0": no record moved aside under that name (no-such-conflict: "contiv-netctl ipam conflicts" lists the names)`},
		{"cannot restore: held", "restore", http.StatusConflict,
			`{"error": "conflict \"default/web-0\": the record cannot be restored: 10.1.1.9 is held by default/web-1", "reason": "cannot-restore"}`, true,
			`409 Conflict: conflict "default/web-0": the record cannot be restored: 10.1.1.9 is held by default/web-1 (cannot-restore: free the address (release its holder) or add its pool back, then restore; or discard the record once its pod is gone)`},
		{"cannot restore: outside", "restore", http.StatusConflict,
			`{"error": "conflict \"default/web-0\": the record cannot be restored: 9.9.9.9 is not in a pod subnet or pool of this node (10.1.1.0/24)", "reason": "cannot-restore"}`, true,
			`409 Conflict: conflict "default/web-0": the record cannot be restored: 9.9.9.9 is not in a pod subnet or pool of this node (10.1.1.0/24) (cannot-restore: `},
		{"forbidden", "restore", http.StatusForbidden,
			`{"error": "the operator calls change IPAM state and need client authentication; set client-basic-auth, or client-cert-files with server-cert-file and server-key-file in http.conf", "reason": "forbidden"}`, false,
			`403 Forbidden: the operator calls change IPAM state and need client authentication; set client-basic-auth, or client-cert-files with server-cert-file and server-key-file in http.conf (forbidden: restore and discard need an agent whose REST server authenticates its clients (client-basic-auth or client-cert-files in its http.conf))`},
		{"not ready", "discard", http.StatusServiceUnavailable,
			`{"error": "IPAM is not initialised yet: no resync processed", "reason": "not-ready"}`, true,
			`503 Service Unavailable: IPAM is not initialised yet: no resync processed (not-ready: the agent's IPAM has not processed its first resync, or is closing: try again)`},
		{"unauthorized", "discard", http.StatusUnauthorized, `{"error": "authentication required"}`, false,
			`401 Unauthorized: authentication required (the server wants basic authentication: give -user user:password or set CONTIV_NETCTL_USER)`},
		{"another reason", "restore", http.StatusBadRequest,
			`{"error": "body: field \"conflict\": is not a conflict name: it has \"..\" or starts with \"/\"", "reason": "bad-request"}`, true,
			`400 Bad Request: body: field "conflict": is not a conflict name: it has ".." or starts with "/" (reason bad-request)`},
		{"older agent", "restore", http.StatusNotFound, "404 page not found", true,
			`404 Not Found: 404 page not found (the agent does not serve this call: it is older than the conflicts calls)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			f := newFakeAgent(t)
			path := restoreConflictPath
			if tc.verb == "discard" {
				path = discardConflictPath
			}
			f.reply(http.MethodPost, path, tc.status, tc.body)
			flags := []string{"-server", f.URL}
			if tc.user {
				flags = creds(f)
			}
			res := netctl(t, nil, "", args(flags, "ipam", "conflicts", tc.verb, "default/web-0")...)
			g.Expect(res.code).To(Equal(exitError))
			g.Expect(res.stdout).To(BeEmpty())
			g.Expect(res.stderr).To(HavePrefix(`contiv-netctl: ipam conflicts ` + tc.verb + ` "default/web-0": POST ` + f.URL + path + ": " + tc.msg))
			g.Expect(strings.Count(res.stderr, "\n")).To(Equal(1), "one line")
		})
	}
}

// A 200 that does not say the call was done is a failure.
func TestConflictReplyNotDone(t *testing.T) {
	g := NewWithT(t)
	f := newFakeAgent(t)
	f.reply(http.MethodPost, restoreConflictPath, http.StatusOK, `{"conflict": "default/web-0"}`)
	res := netctl(t, nil, "", args(creds(f), "ipam", "conflicts", "restore", "default/web-0")...)
	g.Expect(res.code).To(Equal(exitError))
	g.Expect(res.stderr).To(Equal(`contiv-netctl: ipam conflicts restore "default/web-0": the agent's reply "{\"conflict\": \"default/web-0\"}" does not say restored` + "\n"))

	f.reply(http.MethodPost, discardConflictPath, http.StatusOK, `not json`)
	res = netctl(t, nil, "", args(creds(f), "ipam", "conflicts", "discard", "default/web-0")...)
	g.Expect(res.code).To(Equal(exitError))
	g.Expect(res.stderr).To(HavePrefix(`contiv-netctl: ipam conflicts discard "default/web-0": the agent's reply "not json": invalid character`))
}

// restore with a client certificate in place of basic authentication.
func TestConflictRestoreWithAClientCertificate(t *testing.T) {
	g := NewWithT(t)
	p := newTestPKI(t)
	f := mutualTLSAgent(t, p)
	res := netctl(t, nil, "", "-server", f.URL, "-cacert", p.caFile, "-cert", p.clientCert, "-key", p.clientKey,
		"ipam", "conflicts", "restore", "default/web-0")
	g.Expect(res.code).To(Equal(exitOK), res.stderr)
	g.Expect(res.stdout).To(HavePrefix(`restored conflict "default/web-0"`))
	reqs := f.received()
	g.Expect(reqs).To(HaveLen(1))
	g.Expect(reqs[0].header.Get("Authorization")).To(BeEmpty())
	g.Expect(reqs[0].body).To(MatchJSON(`{"conflict": "default/web-0"}`))
}
