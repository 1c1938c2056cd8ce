package bolt

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"time"
)

// Config is the content of bolt.conf. A missing file means DefaultConfig().
type Config struct {
	// DBPath is the database file; its parent directory is created.
	DBPath string `json:"db-path"`
	// FileMode is the permission of a newly created file.
	FileMode FileMode `json:"file-mode"`
	// LockTimeout is how long Init waits for another process to release
	// the file lock; 0 waits forever.
	LockTimeout time.Duration `json:"lock-timeout"`
	// MaxBatchSize is the most write requests committed together.
	MaxBatchSize int `json:"max-batch-size"`
	// WatchHistory is how many past events are kept in memory so that a
	// Watch can start at an older revision.
	WatchHistory int `json:"watch-history"`
	// WatchBuffer is how many events a slow watcher may lag behind before
	// its channel is closed.
	WatchBuffer int `json:"watch-buffer"`
}

// DefaultConfig returns the configuration used when bolt.conf is missing;
// a file overrides only the keys it sets.
func DefaultConfig() Config {
	return Config{
		DBPath:       "/var/lib/contiv-agent/bolt.db",
		FileMode:     0o600,
		LockTimeout:  5 * time.Second,
		MaxBatchSize: 1024,
		WatchHistory: 4096,
		WatchBuffer:  1024,
	}
}

// Validate checks every key; an error names the key and the bad value.
func (c *Config) Validate() error {
	var errs []error
	if strings.TrimSpace(c.DBPath) == "" {
		errs = append(errs, errors.New(`db-path: must not be empty`))
	}
	if c.FileMode > 0o777 {
		errs = append(errs, fmt.Errorf("file-mode: %s is not a permission (at most 0777)", c.FileMode))
	} else if c.FileMode&0o600 != 0o600 {
		errs = append(errs, fmt.Errorf("file-mode: %s must let the owner read and write (0600)", c.FileMode))
	}
	if c.LockTimeout < 0 {
		errs = append(errs, fmt.Errorf("lock-timeout: %s is negative", c.LockTimeout))
	}
	if c.MaxBatchSize < 1 {
		errs = append(errs, fmt.Errorf("max-batch-size: %d, want at least 1", c.MaxBatchSize))
	}
	if c.WatchHistory < 0 {
		errs = append(errs, fmt.Errorf("watch-history: %d is negative", c.WatchHistory))
	}
	if c.WatchBuffer < 1 {
		errs = append(errs, fmt.Errorf("watch-buffer: %d, want at least 1", c.WatchBuffer))
	}
	if len(errs) > 0 {
		return fmt.Errorf("bolt config: %w", errors.Join(errs...))
	}
	return nil
}

// FileMode is a file permission. In bolt.conf write it as a quoted octal
// string ("0600", "0o640"); an unquoted YAML number is taken as YAML reads
// it (0600 is octal, 384 is decimal).
type FileMode uint32

// UnmarshalText parses an octal permission string.
func (m *FileMode) UnmarshalText(text []byte) error {
	s := strings.TrimPrefix(strings.TrimPrefix(string(text), "0o"), "0O")
	v, err := strconv.ParseUint(s, 8, 32)
	if err != nil {
		return fmt.Errorf("file mode %q is not an octal number such as \"0600\"", text)
	}
	*m = FileMode(v)
	return nil
}

// MarshalText prints the mode as four octal digits.
func (m FileMode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// String prints the mode as four octal digits ("0600").
func (m FileMode) String() string { return fmt.Sprintf("%04o", uint32(m)) }

// Perm returns the mode as an fs.FileMode.
func (m FileMode) Perm() fs.FileMode { return fs.FileMode(m) & fs.ModePerm }
