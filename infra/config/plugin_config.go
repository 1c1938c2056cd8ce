package config

import (
	"flag"
	"fmt"
	"os"
	"sync"
)

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

// Checker is a PluginConfig that can find and read its file ahead of the
// decoding, so that a file that cannot be right stops the agent before any
// plugin starts (see infra.ConfigLoader).
type Checker interface {
	// Check finds and reads the file and checks that it is a YAML mapping;
	// no file (and none asked for) is fine. Later LoadValue calls decode
	// the bytes Check read.
	Check() error
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
// PluginConfig, Checker and FlagRegistrar.
//
// State: flags is set once by RegisterFlags before the command line is
// parsed. mu guards the file read by Check (checked, path, data), which
// LoadValue and GetConfigName reuse; the agent calls Check and then the
// plugin's Init on one goroutine, the lock makes any other order safe.
type FileConfig struct {
	name        string
	flagName    string
	defaultFile string
	path        string
	env         func(string) (string, bool)
	flags       *flag.FlagSet

	mu      sync.Mutex
	checked bool   // Check succeeded: path and data are the file
	file    string // resolved path, "" = no file
	data    []byte
}

var (
	_ PluginConfig  = (*FileConfig)(nil)
	_ Checker       = (*FileConfig)(nil)
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
		fs.String(c.flagName, "", fmt.Sprintf(
			"config file of plugin %s, absolute or relative to the working directory (env %s; unset: %s in -%s)",
			c.name, EnvName(c.flagName), c.defaultFile, DirFlag))
	}
	RegisterDirFlag(fs)
}

// RegisterDirFlag adds -config-dir to fs unless it is there.
func RegisterDirFlag(fs *flag.FlagSet) {
	if fs.Lookup(DirFlag) == nil {
		fs.String(DirFlag, "", "directory of the <plugin>.conf files not named by their own flag or env; "+
			"must exist (env CONFIG_DIR; unset: the working directory)")
	}
}

// GetConfigName returns the file that LoadValue reads, or "" when there is
// none or it cannot be found (LoadValue then says why).
func (c *FileConfig) GetConfigName() string {
	if file, _, ok := c.cached(); ok {
		return file
	}
	path, _, err := c.resolve()
	if err != nil {
		return ""
	}
	return path
}

// Check implements Checker: it finds and reads the file once and checks
// its YAML syntax; LoadValue then decodes these bytes.
func (c *FileConfig) Check() error {
	file, data, err := c.read()
	if err != nil {
		return err
	}
	if file != "" {
		if _, err := parseYAML(data, file); err != nil {
			return err
		}
	}
	c.mu.Lock()
	c.checked, c.file, c.data = true, file, data
	c.mu.Unlock()
	return nil
}

// LoadValue decodes the config file into ptr: the bytes Check read, else
// the file read now.
func (c *FileConfig) LoadValue(ptr any) (bool, error) {
	file, data, ok := c.cached()
	if !ok {
		var err error
		if file, data, err = c.read(); err != nil {
			return false, err
		}
	}
	if file == "" {
		return false, nil
	}
	if err := Decode(data, ptr, file); err != nil {
		return false, err
	}
	return true, nil
}

// cached returns what Check read; ok is false before a successful Check.
func (c *FileConfig) cached() (file string, data []byte, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.file, c.data, c.checked
}

// read finds and reads the file; "" means there is none.
func (c *FileConfig) read() (string, []byte, error) {
	path, origin, err := c.resolve()
	if err != nil || path == "" {
		return "", nil, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", nil, fmt.Errorf("config file %q (%s): cannot be read: %w", path, origin, err)
	}
	return path, data, nil
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

// NoFile is the PluginConfig of a plugin that reads no file: LoadValue
// finds nothing (the plugin keeps its defaults or its UseConf config), no
// -<name>-config flag is registered (it is no FlagRegistrar) and there is
// nothing to check (it is no Checker).
var NoFile PluginConfig = noFile{}

type noFile struct{}

func (noFile) LoadValue(any) (bool, error) { return false, nil }
func (noFile) GetConfigName() string       { return "" }
