// Package logging gives every plugin a named log/slog logger whose level can
// be changed at run time.
//
// The caller's duties, in order:
//  1. Create one Registry per process (NewRegistry), or use Default(), which
//     reads the initial level from INITIAL_LOGLVL.
//  2. Ask it for loggers by name (Registry.Logger). Names are dotted paths:
//     a plugin's logger is its plugin name, a child is "<plugin>.<child>".
//  3. Change levels with Registry.SetLevel. A level set for a name that has no
//     logger yet is remembered and applied when the logger is created (at
//     most MaxRememberedLevels such names; beyond, ErrTooManyRemembered);
//     the name "default" sets the level of loggers created from then on.
//
// Levels are trace, debug, info, warn (or warning) and error. Every record
// carries the attribute logger=<name>.
package logging
