// Package metrics is the Prometheus plugin ("metrics", config metrics.conf).
// It owns one prometheus.Registry (never the process-global default
// registry) and serves it over the REST plugin.
//
// What a plugin that exports metrics does, in order:
//  1. Declare a dependency typed API, or prometheus.Registerer (the Plugin
//     is one), nil meaning "no metrics".
//  2. Register its collectors, at any time: before or after this plugin's
//     Init, before or after the server starts. Everything registered is
//     served from the next scrape on. Unregister what you registered in
//     your Close if the registry may outlive you (tests).
//
// What the agent (or a test) does, in order:
//  1. NewPlugin(opts...): the registry exists from here on (UseRegistry
//     injects one).
//  2. Init reads metrics.conf, adds the Go runtime and process collectors
//     and attaches GET <path> (default /metrics) to the HTTP dependency when
//     it is set. The handler is attached here, in Init, and serves the live
//     registry, so collectors registered later are served too.
//  3. Close removes the Go and process collectors that Init added.
package metrics
