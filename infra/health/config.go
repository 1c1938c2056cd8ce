package health

import (
	"errors"
	"fmt"
	"time"
)

// Config is the content of health.conf.
type Config struct {
	// ProbeInterval is how often registered probes are polled.
	ProbeInterval time.Duration `json:"probe-interval"`
	// NonFatalPlugins are plugins whose state does not count towards the
	// agent state (added to those given with WithNonFatalPlugins).
	NonFatalPlugins []string `json:"non-fatal-plugins"`
}

// DefaultConfig returns the config used for keys the file leaves out.
func DefaultConfig() Config { return Config{ProbeInterval: 5 * time.Second} }

// Validate checks every key; each error names the key and the value.
func (c *Config) Validate() error {
	var errs []error
	if c.ProbeInterval <= 0 {
		errs = append(errs, fmt.Errorf("probe-interval %q: must be positive", c.ProbeInterval))
	}
	for i, n := range c.NonFatalPlugins {
		if n == "" {
			errs = append(errs, fmt.Errorf("non-fatal-plugins[%d]: empty plugin name", i))
		}
	}
	return errors.Join(errs...)
}
