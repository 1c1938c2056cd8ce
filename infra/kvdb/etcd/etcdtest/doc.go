// Package etcdtest runs a real etcd server inside a test, on 127.0.0.1 with
// its data in t.TempDir(), through the same code the etcd plugin uses for
// its embedded mode.
//
// Caller duties, in order:
//  1. srv := etcdtest.Start(t) (options: WithPort to listen on a chosen
//     client port, WithLogger to see etcd's warnings). The server is
//     stopped by t.Cleanup.
//  2. Point clients at srv.Endpoint() ("127.0.0.1:<port>"), or take a raw
//     client from srv.Client(t).
//  3. To simulate an outage call srv.Stop() and later srv.Restart(): the
//     server comes back with the same data and the same ports, so existing
//     clients reconnect by themselves.
//  4. Call Start, Stop and Restart from the test goroutine: they fail the
//     test with t.Fatal.
package etcdtest
