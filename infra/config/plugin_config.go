package config

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// DirFlag is the agent-wide flag (env CONFIG_DIR) naming the config directory.
const DirFlag = "config-dir"

// PluginConfig is what a plugin uses to read its config file.
type PluginConfig interface {
	// LoadValue decodes the plugin's config file into ptr. found is false
	// when there is no file and none was asked for; ptr is then untouched.
	LoadValue(ptr any) (found bool, err error)
	// GetConfigName returns the resolved file path, or "" when there is none.
	GetConfigName() string
}

// FlagRegistrar is implemented by anything that adds flags to the agent's
// command line before it is parsed.
type FlagRegistrar interface {
	RegisterFlags(fs *flag.FlagSet)
}

// Option changes how ForPlugin finds the file.
type Option func(*FileConfig)

// WithPath names the file explicitly; it must exist.
func WithPath(path string) Option { return func(c *FileConfig) { c.path = path } }

// WithFlag replaces the default flag name and default file name.
func WithFlag(flagName, defaultFile string) Option {
	return func(c *FileConfig) { c.flagName, c.defaultFile = flagName, defaultFile }
}

// WithEnv replaces os.LookupEnv (tests).
func WithEnv(lookup func(string) (string, bool)) Option {
	return func(c *FileConfig) { c.env = lookup }
}

// FileConfig finds and decodes one plugin's config file. It implements
// PluginConfig and FlagRegistrar.
type FileConfig struct {
	name        string
	flagName    string
	defaultFile string
	path        string
	env         func(string) (string, bool)
	flags       *flag.FlagSet
}

var (
	_ PluginConfig  = (*FileConfig)(nil)
	_ FlagRegistrar = (*FileConfig)(nil)
)

// ForPlugin builds the config accessor of the plugin called name.
func ForPlugin(name string, opts ...Option) *FileConfig {
	c := &FileConfig{
		name:        name,
		flagName:    name + "-config",
		defaultFile: name + ".conf",
		env:         os.LookupEnv,
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// RegisterFlags adds -<name>-config and, once per FlagSet, -config-dir.
func (c *FileConfig) RegisterFlags(fs *flag.FlagSet) {
	c.flags = fs
	if fs.Lookup(c.flagName) == nil {
		fs.String(c.flagName, c.defaultFile,
			fmt.Sprintf("config file of plugin %s (env %s)", c.name, EnvName(c.flagName)))
	}
	if fs.Lookup(DirFlag) == nil {
		fs.String(DirFlag, ".", "directory searched for plugin config files (env CONFIG_DIR)")
	}
}

// GetConfigName returns the file that LoadValue would read, or "".
func (c *FileConfig) GetConfigName() string {
	path, _ := c.resolve()
	return path
}

// LoadValue decodes the config file into ptr.
func (c *FileConfig) LoadValue(ptr any) (bool, error) {
	path, err := c.resolve()
	if err != nil || path == "" {
		return false, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	if err := Decode(data, ptr, path); err != nil {
		return false, err
	}
	return true, nil
}

// resolve finds the file: "" with no error means there is none.
func (c *FileConfig) resolve() (string, error) {
	name, origin := c.path, "WithPath"
	if name == "" {
		var explicit bool
		name, explicit = Lookup(c.flags, c.flagName, c.defaultFile, c.env)
		origin = ""
		if explicit {
			origin = fmt.Sprintf("flag -%s / env %s", c.flagName, EnvName(c.flagName))
		}
	}
	if name == "" {
		return "", nil
	}
	for _, candidate := range c.candidates(name) {
		if st, err := os.Stat(candidate); err == nil && !st.IsDir() {
			return candidate, nil
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("config file %q: %w", candidate, err)
		}
	}
	if origin == "" {
		return "", nil
	}
	return "", fmt.Errorf("config file %q (from %s) not found", name, origin)
}

func (c *FileConfig) candidates(name string) []string {
	if filepath.IsAbs(name) {
		return []string{name}
	}
	dir, _ := Lookup(c.flags, DirFlag, ".", c.env)
	return []string{name, filepath.Join(dir, name)}
}

// Lookup returns the value of a flag with the environment as fallback:
// the command line wins, then env EnvName(flagName), then def. explicit
// reports whether the value came from the command line or the environment.
// fs may be nil (no command line) or unparsed.
func Lookup(fs *flag.FlagSet, flagName, def string, env func(string) (string, bool)) (value string, explicit bool) {
	if fs != nil && fs.Parsed() {
		set := false
		fs.Visit(func(f *flag.Flag) {
			if f.Name == flagName {
				set = true
				value = f.Value.String()
			}
		})
		if set {
			return value, true
		}
	}
	if env == nil {
		env = os.LookupEnv
	}
	if v, ok := env(EnvName(flagName)); ok && v != "" {
		return v, true
	}
	return def, false
}

// EnvName maps a flag name to its environment variable: upper case with
// '-' replaced by '_' (etcd-config -> ETCD_CONFIG).
func EnvName(flagName string) string {
	return strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Validator is a plugin configuration that checks itself.
type Validator interface {
	Validate() error
}

// Load decodes the plugin's file (if any) over the values already in conf
// (normally the defaults) and validates the result. Validation errors name
// the file, or "defaults" when there is none.
func Load(pc PluginConfig, conf Validator) error {
	if _, err := pc.LoadValue(conf); err != nil {
		return err
	}
	if err := conf.Validate(); err != nil {
		return fmt.Errorf("config %s: %w", SourceName(pc), err)
	}
	return nil
}

// LoadOrFixed returns the plugin's config: a copy of *fixed, validated,
// when it is set (the plugin's UseConf option), else def with the
// plugin's file decoded over it (Load).
func LoadOrFixed[T any, PT interface {
	*T
	Validator
}](pc PluginConfig, fixed *T, def T) (T, error) {
	if fixed != nil {
		c := *fixed
		return c, PT(&c).Validate()
	}
	return def, Load(pc, PT(&def))
}

// SourceName is the file pc reads, or "defaults" when there is none.
func SourceName(pc PluginConfig) string {
	if name := pc.GetConfigName(); name != "" {
		return name
	}
	return "defaults"
}

// NoFile is a PluginConfig without a file: LoadValue finds nothing and the
// plugin keeps its defaults (or the config given with its UseConf option).
var NoFile PluginConfig = noFile{}

type noFile struct{}

func (noFile) LoadValue(any) (bool, error) { return false, nil }
func (noFile) GetConfigName() string       { return "" }
