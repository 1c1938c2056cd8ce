// Package embedded runs an in-process etcd server on loopback. The etcd
// plugin uses it when no endpoints are configured, and etcdtest uses it in
// tests: both go through Start, so there is one way to embed etcd.
//
// Caller duties, in order:
//  1. Check user-given URLs with CheckLoopback (the server must never
//     listen beyond this machine).
//  2. Call Start with a data directory and the client and peer URLs; port
//     0 picks a free port, read the real one from ClientURL/Endpoint.
//  3. To restart on the same ports (so clients reconnect), Close and Start
//     again with the same Dir and the URLs returned by ClientURL and
//     PeerURL.
//  4. Call Close exactly once when done.
package embedded
