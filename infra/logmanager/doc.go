// Package logmanager sets the levels of the agent's named loggers from
// logmanager.conf and over REST (plugin "logmanager").
//
// What happens, in order:
//  1. Init reads logmanager.conf (none: nothing changes) and validates it.
//  2. Init sets the default level (env INITIAL_LOGLVL when set, else the
//     file's default-level, else nothing) on the registry's default, so it
//     applies to loggers created later, and on every existing logger.
//  3. Init then sets each entry of loggers; a level for a logger that does
//     not exist yet is remembered and applied when it is created.
//  4. Init registers the REST endpoints when the HTTP dependency is set:
//     GET /log/list lists every existing logger and its level, sorted by
//     name; PUT /log/{logger}/{level} sets one level (remembered for loggers
//     not created yet; the name "default" means loggers created from now on)
//     and echoes {"logger", "level"}; a bad name or level gets 400 and
//     {"error": "..."}, and so does a level for a logger that does not
//     exist yet once logging.MaxRememberedLevels (256) such levels are
//     remembered (the map of remembered levels is bounded).
//
// Caller duties: wire Deps.LogRegistry to the registry the other plugins take
// their loggers from (nil means logging.Default()), and Deps.HTTP to the
// REST plugin (nil means no endpoints). Levels are trace, debug, info, warn
// (or warning) and error.
package logmanager
