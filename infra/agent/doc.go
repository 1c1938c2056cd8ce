// Package agent runs a set of plugins: it finds them, parses the command
// line they declare, starts them in dependency order and stops them in
// reverse.
//
// The caller's duties, in order:
//  1. Build the plugins with their packages' NewPlugin functions, wiring
//     each dependency field to the instance it should use.
//  2. Call NewAgent with AllPlugins(top...) (discover dependencies through
//     exported fields) or Plugins(p...) (exactly this order). NewAgent
//     rejects two different plugins with the same name, registers every
//     plugin's flags on one FlagSet and parses the arguments.
//  3. Call Run (Start, wait for a quit signal, channel or context, Stop), or
//     Start and later Stop yourself.
//
// What the agent guarantees:
//   - Before any Init, Start refuses a -config-dir / CONFIG_DIR that does
//     not exist or is not a directory, then calls LoadConfig on every
//     plugin that has it (infra.ConfigLoader; every plugin embedding
//     infra.PluginDeps has one that finds, reads and checks its file), in
//     order. A failure there ends Start with nothing initialised and
//     nothing to close: a config that cannot be right creates nothing.
//   - Init is called on every plugin in order, only after every LoadConfig
//     succeeded; AfterInit on every plugin that has it, in order, only
//     after all Init calls succeeded.
//   - If an Init or AfterInit fails or the start timeout passes, every plugin
//     whose Init was called (the failing one included) is closed in reverse
//     order, and Start returns the error.
//   - Close never runs concurrently with the same plugin's Init or
//     AfterInit, and runs at most once per plugin. A plugin still in Init or
//     AfterInit at the start timeout is closed when that call returns (after
//     the plugins closed at the timeout, its dependencies included); Start's
//     error names it, and a Stop after the failed Start waits for that Close
//     within the stop timeout and returns its errors (the late call's error
//     included), or says the plugin still runs.
//   - Stop closes every started plugin in reverse order even when some Close
//     fails; the errors are joined. A stop timeout is returned as an error.
//   - Run returns Start's error joined with Stop's.
//
// State: Agent.mu guards the list of plugins to close, the plugin whose
// LoadConfig, Init or AfterInit runs, the step description and the abort
// and pending markers; they are shared by the start goroutine (which alone
// calls LoadConfig, Init and AfterInit) and the caller's goroutine (Start,
// Stop). A plugin still in LoadConfig at the start timeout is handled like
// one still in Init (closed when the call returns; Close must be safe
// without Init).
//   - Start and Stop each run once; later calls return the first result.
//   - The library never exits the process: main decides the exit code.
//
// Discovery rules (AllPlugins): the exported fields of each plugin struct
// are walked in declaration order; a field holding a plugin (pointer,
// interface or addressable struct whose pointer is a plugin) is visited
// after its own dependencies; anonymous (embedded) structs are walked
// through; slices and arrays are expanded; nil values are skipped; a plugin
// reached twice is listed once (this also breaks cycles); the top-level
// plugins come after everything they reach.
package agent
