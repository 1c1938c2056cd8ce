// Package config finds and decodes each plugin's <name>.conf file.
//
// How a plugin's file is found, in order:
//  1. A path given with WithPath (tests).
//  2. The flag -<name>-config on the agent's command line.
//  3. The environment variable <NAME>_CONFIG (upper case, '-' becomes '_').
//  4. The default file name <name>.conf.
//
// A relative path is tried as given (against the working directory), then in
// the config directory: flag -config-dir, else env CONFIG_DIR, else ".".
// A missing default file means "no config" (LoadValue returns found=false and
// the plugin keeps its defaults); a file named explicitly by 1–3 that does not
// exist is an error.
//
// Files are YAML whose keys match the config struct's json tags. Decoding is
// strict: an unknown key, a duplicate key or a value of the wrong type is an
// error that names the key and the file. Durations are strings such as "5s".
//
// Caller duties:
//  1. Build a PluginConfig with ForPlugin(name) when the plugin is constructed.
//  2. Before the agent parses the command line it calls RegisterFlags with the
//     agent's FlagSet; after parsing, LoadValue sees the flag values.
//  3. Fill the config struct with defaults, then call LoadValue(&cfg), then
//     validate.
package config
