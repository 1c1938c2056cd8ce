package metrics

import (
	"fmt"
	"strings"
)

// DefaultPath is where the metrics are served unless configured otherwise.
const DefaultPath = "/metrics"

// Config is the content of metrics.conf.
type Config struct {
	// Path is the HTTP path that serves the metrics (GET).
	Path string `json:"path"`
}

// DefaultConfig returns the config used for keys the file leaves out.
func DefaultConfig() Config { return Config{Path: DefaultPath} }

// Validate checks that path is a plain absolute path.
func (c *Config) Validate() error {
	switch {
	case c.Path == "" || c.Path == "/":
		return fmt.Errorf("path %q: want a path such as %q", c.Path, DefaultPath)
	case !strings.HasPrefix(c.Path, "/"):
		return fmt.Errorf("path %q: must start with '/'", c.Path)
	case strings.ContainsAny(c.Path, "{} \t?#"):
		return fmt.Errorf("path %q: must not contain '{', '}', '?', '#' or white space", c.Path)
	}
	return nil
}
