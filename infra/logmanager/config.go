package logmanager

import (
	"errors"
	"fmt"

	"github.com/contiv-ipam/agent/infra/logging"
)

// Config is the content of logmanager.conf.
type Config struct {
	// DefaultLevel is the level of every logger without a level of its own;
	// empty keeps the registry's level. INITIAL_LOGLVL, when set, wins.
	DefaultLevel string `json:"default-level"`
	// Loggers sets levels per logger, applied after the default level.
	Loggers []LoggerConfig `json:"loggers"`
}

// LoggerConfig is one entry of Config.Loggers.
type LoggerConfig struct {
	Name  string `json:"name"`
	Level string `json:"level"`
}

// DefaultConfig returns the config used without a file: change nothing.
func DefaultConfig() Config { return Config{} }

// Validate checks every level name and logger name; each error names the
// key, the logger and the level.
func (c *Config) Validate() error {
	var errs []error
	if c.DefaultLevel != "" {
		if _, err := logging.ParseLevel(c.DefaultLevel); err != nil {
			errs = append(errs, fmt.Errorf("default-level: %w", err))
		}
	}
	for i, l := range c.Loggers {
		if l.Name == "" {
			errs = append(errs, fmt.Errorf("loggers[%d]: empty name (level %q)", i, l.Level))
			continue
		}
		if _, err := logging.ParseLevel(l.Level); err != nil {
			errs = append(errs, fmt.Errorf("loggers[%d] (logger %q): level: %w", i, l.Name, err))
		}
	}
	return errors.Join(errs...)
}
