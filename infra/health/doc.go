// Package health keeps the health of every plugin and of the agent
// (plugin "health", config health.conf) and serves it as Kubernetes probes.
//
// The agent state (readiness) is the worst state (Error > Init > OK)
// among the fatal plugins; plugins named in non-fatal-plugins or
// WithNonFatalPlugins do not count. With no plugin registered the agent is
// OK. The liveness (AgentStatus.Live) is Error only while a fatal plugin
// registered with RegisterLiveness is in Error: liveness reflects the
// process (the controller's event loop: dead or stuck), never a dependency
// such as etcd, whose outage must not make Kubernetes restart every agent
// of the cluster at once.
//
// What a plugin that reports its health does, in order:
//  1. Declare a dependency typed Reporter (nil means "do not report").
//  2. In its Init call Register(name, probe), or, when its Error state
//     means the process must be restarted, RegisterLiveness (assert the
//     Reporter to LivenessReporter): the plugin starts in state Init. probe may be nil; when set it is polled every probe-interval
//     from AfterInit on, and its result replaces the state. Probes must
//     return promptly; a panicking probe counts as Error.
//  3. Call ReportStateChange(name, state, err) whenever its state changes
//     (a plugin that never registered is added on its first report).
//
// What the agent (or a test) does, in order:
//  1. NewPlugin(opts...) (UseBuildInfo, WithNonFatalPlugins, UseConf).
//  2. Init reads health.conf, registers the gauges agent_health and
//     agent_plugin_health{plugin} with Deps.Metrics and the endpoints with
//     Deps.HTTP (both optional): GET /liveness answers 200 unless Live is
//     Error, 503 then; GET /readiness answers 200 only when the agent state
//     is OK, 503 otherwise. Both bodies are the AgentStatus as JSON (state,
//     live and every plugin with its error). When http.conf turns client
//     authentication on, the REST server still serves both paths to every
//     client (they are rest.ProbePaths: the kubelet sends no credentials);
//     a client without valid credentials (rest.Anonymous) gets only
//     ProbeStatus, {"state", "live"}.
//  3. AfterInit starts the probe loop (first round at once).
//  4. Close stops the loop, waits for it and unregisters the gauges.
package health
