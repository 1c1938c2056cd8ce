// Package config finds and decodes each plugin's <name>.conf file.
//
// How a plugin's file is found, first match wins:
//  1. A path given with WithPath (tests).
//  2. The flag -<name>-config on the agent's command line.
//  3. The environment variable <NAME>_CONFIG (upper case, '-' becomes '_').
//  4. The default file <name>.conf in the config directory: the flag
//     -config-dir, else env CONFIG_DIR, else the working directory. There is
//     no second place: with a config directory, a <name>.conf in the working
//     directory is not read.
//
// A path from 1–3 is used as given: absolute, or relative to the working
// directory (never to the config directory); it must exist. A missing
// default file (4) means "no config": LoadValue returns found=false and the
// plugin keeps its defaults. Refused, with an error naming the flag or the
// environment variable and the path: a config directory that was given but
// does not exist or is not a directory; an empty path in a flag (an empty
// environment variable counts as unset); a config file (given or default)
// that is a directory, a socket or a symbolic link to a missing file; a
// file that cannot be read.
//
// Files are YAML whose keys match the config struct's json tags. Decoding is
// strict: an unknown key, a duplicate key or a value of the wrong type is an
// error that names the key and the file. Durations are strings such as "5s".
//
// A plugin without a file uses NoFile: it registers no flag and finds no
// file.
//
// Caller duties:
//  1. Build a PluginConfig with ForPlugin(name) when the plugin is
//     constructed (or NoFile).
//  2. Before the agent parses the command line it calls RegisterFlags with
//     the agent's FlagSet; after parsing, the lookup sees the flag values.
//  3. Optionally call Check (the agent does, through infra.ConfigLoader,
//     before any plugin's Init): it finds and reads the file once and checks
//     its YAML syntax; later LoadValue calls decode those bytes.
//  4. Fill the config struct with defaults, then call LoadValue(&cfg), then
//     validate (Load and LoadOrFixed do both).
//
// State: a FileConfig's flags are set by RegisterFlags before parsing; the
// bytes Check read are guarded by the FileConfig's mutex.
package config
