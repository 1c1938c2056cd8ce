// Package etcdtest runs real etcd servers for tests, on 127.0.0.1 with
// their data in t.TempDir(): in the test process, through the same code
// the etcd plugin uses for its embedded mode (Start), or as a child
// process of the etcd binary the Kubernetes tests use (StartProcess).
//
// Caller duties, in order:
//  1. srv := etcdtest.Start(t) (options: WithPort to listen on a chosen
//     client port, WithLogger to see etcd's warnings), or
//     proc := etcdtest.StartProcess(t) for an external etcd (the binary of
//     $KUBEBUILDER_ASSETS, else of _cache/kube/*/: `make kube-bins`; a
//     missing binary fails the test). Both are stopped by t.Cleanup.
//  2. Point clients at Endpoint() ("127.0.0.1:<port>"), or take a raw
//     client from Client(t).
//  3. To simulate an outage call Stop() and later Restart(): the server
//     comes back with the same data and the same ports, so existing
//     clients reconnect by themselves. A Process is stopped with SIGKILL;
//     its Replace() starts an empty store on the same ports instead (its
//     revision starts again at 1, its cluster ID stays): a store restored
//     from an old snapshot or wiped, behind the same endpoint;
//     ReplaceCluster() starts another cluster there (another cluster ID).
//  4. Call Start, StartProcess and the methods from the test goroutine:
//     they fail the test with t.Fatal.
//
// Owners: a Server's and a Process's state belong to the test goroutine
// that calls their methods; their mutexes only let Stop at cleanup and
// the process's waiter goroutine (which reaps the child and closes done)
// and output buffer be read safely.
package etcdtest
