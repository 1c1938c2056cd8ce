package config

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// DirFlag is the agent-wide flag (env CONFIG_DIR) naming the config directory.
const DirFlag = "config-dir"

// Lookup returns the value of a flag with the environment as fallback:
// the command line wins, then env EnvName(flagName), then def. explicit
// reports whether the value came from the command line or the environment.
// flags may be nil (no command line) or unparsed.
func Lookup(flags *flag.FlagSet, flagName, def string, env func(string) (string, bool)) (value string, explicit bool) {
	value, origin := LookupOrigin(flags, flagName, def, env)
	return value, origin != ""
}

// LookupOrigin is Lookup that also says where the value came from, for
// error messages: "flag -<flagName>", "env <ENV_NAME>", or "" for def. A
// flag set on the command line counts even when its value is empty; an
// empty environment variable counts as unset.
func LookupOrigin(flags *flag.FlagSet, flagName, def string, env func(string) (string, bool)) (value, origin string) {
	if flags != nil && flags.Parsed() {
		set := false
		flags.Visit(func(f *flag.Flag) {
			if f.Name == flagName {
				set, value = true, f.Value.String()
			}
		})
		if set {
			return value, "flag -" + flagName
		}
	}
	if env == nil {
		env = os.LookupEnv
	}
	if v, ok := env(EnvName(flagName)); ok && v != "" {
		return v, "env " + EnvName(flagName)
	}
	return def, ""
}

// EnvName maps a flag name to its environment variable: upper case with
// '-' replaced by '_' (etcd-config -> ETCD_CONFIG).
func EnvName(flagName string) string {
	return strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Dir returns the config directory: flag -config-dir, else env CONFIG_DIR,
// else "" (the working directory); origin says which ("" for the working
// directory). A directory that was given must exist and be a directory;
// the error names the flag or env and the path.
func Dir(flags *flag.FlagSet, env func(string) (string, bool)) (dir, origin string, err error) {
	dir, origin = LookupOrigin(flags, DirFlag, "", env)
	if origin == "" {
		return "", "", nil
	}
	if dir == "" {
		return "", "", fmt.Errorf("config directory (%s): empty path; leave it out to use the working directory", origin)
	}
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", "", fmt.Errorf("config directory %q (%s): does not exist", dir, origin)
	case err != nil:
		return "", "", fmt.Errorf("config directory %q (%s): %w", dir, origin, err)
	case !st.IsDir():
		return "", "", fmt.Errorf("config directory %q (%s): not a directory", dir, origin)
	}
	return dir, origin, nil
}
