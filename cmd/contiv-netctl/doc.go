// Command contiv-netctl is the operator's command line over the cluster's
// etcd and the agents' REST API. One binary, command groups as in kubectl
// or etcdctl:
//
//	contiv-netctl [global flags] nodes [-o table|wide|json|yaml|name]
//	contiv-netctl [global flags] pods [-node N] [-namespace NS] [-o table|wide|json|yaml|name]
//	contiv-netctl [global flags] ipam [-o table|wide|json|yaml] [NODE]
//	contiv-netctl [global flags] ipam checkpoint export [-o file]
//	contiv-netctl [global flags] ipam checkpoint import [-replace] [-from contiv|aws-vpc-cni] file|-
//	contiv-netctl [global flags] ipam check [-o table|json]
//	contiv-netctl [global flags] ipam release -from-report file
//	contiv-netctl [global flags] ipam conflicts [list]
//	contiv-netctl [global flags] ipam conflicts restore|discard NAME
//	contiv-netctl completion bash|zsh
//
// Global flags (-h lists them): -server (env CONTIV_NETCTL_SERVER, default
// http://127.0.0.1:9999), -user user:password (env CONTIV_NETCTL_USER;
// HTTP basic authentication), -cacert, -cert, -key (HTTPS: the CA of the
// server's certificate, the client certificate and its key), -timeout
// (each request; default 30s), -etcd endpoints (comma-separated; env
// CONTIV_NETCTL_ETCD, then ETCDCTL_ENDPOINTS; default
// http://127.0.0.1:2379, the embedded etcd of `make run`), -etcd-cacert,
// -etcd-cert, -etcd-key (an https etcd), -color auto|always|never (auto:
// stdout a terminal and NO_COLOR unset). A flag wins over its environment
// variable.
//
// Exit codes (only main chooses them, from run's result): 0 done; 1 the
// command failed, the reason on stderr naming what failed (the server
// unreachable, a refusal with the server's status and message, a file
// that cannot be read or written, a document that does not decode); 2 a
// usage error, the reason and the usage on stderr. -h prints the usage on
// stdout and exits 0.
//
// Layout: main.go is thin (signals, exit code, whether stdout is a
// terminal); run parses the command line so that tests call it with
// their own streams, environment and clock (cmdIO.now: every relative
// time is rendered against it); command.go holds the global flags and the
// dispatch, client.go the HTTP client, etcd.go the etcd client and its
// reads, output.go the formats, colour, tables, fill bars and ages, one
// file per command group (nodes.go; pods.go; show.go: "ipam [NODE]";
// ipam.go: the ipam dispatch and the checkpoint commands; conflicts.go;
// check.go; release.go with report.go, the report check writes and
// release reads; completion.go), file.go the atomic write.
//
// The views, step by step:
//
// nodes: one etcd transaction reads five prefixes at one revision: the
// node-ID records (/vnf-agent/contiv-ksr/allocatedIDs/), the Kubernetes
// Nodes (.../k8s/node/), the pool grants (.../contiv/poolgrant/), the
// presence keys (/vnf-agent/contiv-nodesync/presence/) and the agents'
// status records (/vnf-agent/contiv-agent/status/, package agentstatus);
// then LeaseTimeToLive of each presence key's lease, at most 16 at once
// (the only per-node calls). The records are joined by node name; one
// that does not decode is left out with a warning on stderr naming its
// key. The agent's state is its status record's: ready, not-ready, stale
// (agentstatus.Stale: never shown as ready) or absent.
//
// pods: one transaction reads the status records and presence keys; each
// agent's REST server (agentstatus.Status.REST) is asked GET
// /contiv/v1/ipam/allocations, at most 16 at once, each within -timeout,
// with the credentials and TLS files of the global flags; -node N asks
// only N's. Owner-keyed allocations are no pods and are left out. An
// agent that cannot be asked (unreachable, an error, no REST address, a
// presence key without a status record) is a warning on stderr naming
// the node and the URL; the others are listed, and the exit status is 1.
//
// ipam [NODE]: the agent at -server, or NODE's (its status record, one
// Get); GET /contiv/v1/ipam, .../pools, .../allocations (the
// reservations: allocations with a reservationDeadline) and
// .../release-candidates. The primary family's pod gateway, NAT loopback
// and VXLAN address are derived as the agent derives them (host 1 of the
// pod subnet, the address before its last, host NODE-ID of vxlanCIDR);
// the second family's come from the agent. A word after ipam that is not
// an ipam command is a NODE ("ipam -- NODE" for a node named like one).
//
// Output: -o table (tabwriter) or wide (more columns), json or yaml
// (sigs.k8s.io/yaml of the same JSON: the field names of nodeView,
// podsReply and ipamView are the stable interface), name (nodes, pods).
// Colour (ANSI) only with -color always, or auto when stdout is a
// terminal and NO_COLOR is unset or empty: every cell of a coloured
// column is wrapped in escapes of the same length, so that tabwriter
// still aligns it.
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
// import -from aws-vpc-cni (awsimport.go): the file is the IPAM checkpoint
// of the AWS VPC CNI ("vpc-cni-ipam/1", /var/run/aws-node/ipam.json),
// decoded and converted by checkpoint.DecodeAWS (each entry an
// attachment with its pod, taken at the file's modification time); a bad
// file is refused naming the entry, the field and the value; the
// converted document is encoded and POSTed as above. A contiv import of
// an AWS file is refused with a hint to use -from.
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
// contiv-netctl imports no plugin but the checkpoint codec, the ksr models
// (agentstatus, codec, node, poolblock, vppnode) and engine/cidr: the REST
// paths and reply shapes it needs are copied, and its tests check them
// against plugins/ipam.
//
// Tests: golden_test.go runs every view and format in-process against an
// embedded etcd (etcdtest) holding fixed records and fake agents
// (httptest on loopback), at a fixed clock, and compares the output with
// testdata/golden/*.txt (go test -run TestGolden -update rewrites them;
// the fixture's ports and the leases' moving TTLs are replaced first).
// completion_test.go runs the bash script in bash and the zsh script in
// zsh when installed. e2e_nodes_test.go runs the built binary against
// tests/cluster (etcd, contiv-ksr, a kube-apiserver, two agents).
package main
