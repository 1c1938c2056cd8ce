// Command contiv-netctl is the operator's command line over the agent's
// REST API. One binary, command groups as in kubectl or etcdctl:
//
//	contiv-netctl [global flags] ipam checkpoint export [-o file]
//	contiv-netctl [global flags] ipam checkpoint import [-replace] file|-
//	contiv-netctl [global flags] ipam check [-o table|json]
//	contiv-netctl [global flags] ipam release -from-report file
//	contiv-netctl [global flags] ipam conflicts [list]
//	contiv-netctl [global flags] ipam conflicts restore|discard NAME
//
// Global flags (-h lists them): -server (env CONTIV_NETCTL_SERVER, default
// http://127.0.0.1:9999), -user user:password (env CONTIV_NETCTL_USER;
// HTTP basic authentication), -cacert, -cert, -key (HTTPS: the CA of the
// server's certificate, the client certificate and its key), -timeout
// (each request; default 30s). A flag wins over its environment variable.
//
// Exit codes (only main chooses them, from run's result): 0 done; 1 the
// command failed, the reason on stderr naming what failed (the server
// unreachable, a refusal with the server's status and message, a file
// that cannot be read or written, a document that does not decode); 2 a
// usage error, the reason and the usage on stderr. -h prints the usage on
// stdout and exits 0.
//
// Layout: main.go is thin (signals, exit code); run parses the command
// line so that tests call it with their own streams and environment;
// command.go holds the global flags and the dispatch, client.go the HTTP
// client, one file per command group (ipam.go: the ipam dispatch and the
// checkpoint commands; conflicts.go; check.go; release.go with report.go,
// the report check writes and release reads), file.go the atomic write.
//
// The checkpoint commands, step by step:
//
// export: GET /contiv/v1/ipam/checkpoint; the document is decoded
// (plugins/ipam/checkpoint) so that a broken reply is never saved (one of
// a newer format is saved, with a warning that this contiv-netctl cannot
// import it); then written to stdout, or with -o to a temporary file in
// the target's directory, synced and renamed over the target (the target
// holds its old content or the whole document, never a part; mode 0600:
// the document names every pod of the node).
//
// import: the file (or stdin) is read, at most 16 MiB, and decoded first:
// a bad document, or one of a newer format, is refused naming the problem
// before anything is sent; then POSTed unchanged to
// /contiv/v1/ipam/checkpoint?replace=true|false; the counts the agent
// answers (imported, skipped, each skipped entry's reason) are printed.
//
// The conflicts commands, step by step (the records a restore of the
// agent could not place, moved aside instead of deleted):
//
// list: GET /contiv/v1/ipam/conflicts; each record is printed as a table
// row: NAME (what restore and discard take), POD, IPS, KEPT-FOR (the
// allocation that kept the address), AT, REASON; no record prints one
// line saying so.
//
// restore, discard: POST {"conflict": NAME} to
// /contiv/v1/ipam/operator/conflicts/restore or .../discard (application/
// json, with the credentials of the global flags); the agent's detail is
// printed. A refusal names the conflict, the server's status and message,
// and its reason with what it means (no-such-conflict, cannot-restore,
// forbidden, not-ready).
//
// The release candidates, step by step:
//
// check: GET /contiv/v1/ipam/release-candidates, printed as a table; with
// -o json, GET /contiv/v1/ipam first (the node the agent serves), and the
// report (the candidates, the node, its ID, the server, when taken) is
// written to stdout as JSON.
//
// release -from-report: the report is read (at most 16 MiB) and checked
// field by field (version, node, every candidate's pod and addresses,
// each address listed once, the types of the other fields): a bad one is
// refused naming the field and the value, nothing sent. GET
// /contiv/v1/ipam: a report of another node is refused. Then, pod by pod,
// address by address: POST /contiv/v1/ipam/operator/release?force=true
// with {"ip", "pod"}; the agent releases the allocation holding the
// address only if that pod holds it (404 not-allocated: skipped, free;
// 409 moved: skipped, another holds it; any other refusal: failed). The
// reply lists every address released (both families of an allocation):
// those are not asked for again. One line per address, then the counts;
// exit 1 if one failed.
//
// contiv-netctl imports no plugin but the checkpoint codec: the REST paths
// and reply shapes it needs are copied, and its tests check them against
// plugins/ipam.
package main
