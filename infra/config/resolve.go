package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// resolve finds the file as the package doc describes: "" with no error
// means there is none. origin says where the path came from, for errors.
func (c *FileConfig) resolve() (path, origin string, err error) {
	if c.path != "" {
		return c.path, "WithPath", checkFile(c.path, "WithPath", true)
	}
	if name, from := LookupOrigin(c.flags, c.flagName, "", c.env); from != "" {
		if name == "" {
			return "", "", fmt.Errorf("config file (%s): empty path; leave the flag out to use %s in the config directory",
				from, c.defaultFile)
		}
		return name, from, checkFile(name, from, true)
	}
	if c.defaultFile == "" {
		return "", "", nil
	}
	dir, dirOrigin, err := Dir(c.flags, c.env)
	if err != nil {
		return "", "", err
	}
	given := fmt.Sprintf("no -%s or %s given", c.flagName, EnvName(c.flagName))
	path, origin = c.defaultFile, given+": the default in the working directory"
	if dir != "" && !filepath.IsAbs(c.defaultFile) {
		path = filepath.Join(dir, c.defaultFile)
		origin = fmt.Sprintf("%s: the default in the directory of %s", given, dirOrigin)
	}
	if err := checkFile(path, origin, false); err != nil {
		if errors.Is(err, errNoFile) {
			return "", "", nil
		}
		return "", "", err
	}
	return path, origin, nil
}

// errNoFile: the default file does not exist (the plugin keeps its
// defaults); never returned to callers.
var errNoFile = errors.New("no config file")

// checkFile accepts an existing file that is not a directory, a named pipe
// or a socket. A missing file is an error when it was asked for
// (required), else errNoFile; a symbolic link to a missing file is always
// an error.
func checkFile(path, origin string, required bool) error {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if _, lerr := os.Lstat(path); lerr == nil {
			return fmt.Errorf("config file %q (%s): a symbolic link to a missing file", path, origin)
		}
		if required {
			return fmt.Errorf("config file %q (%s): not found", path, origin)
		}
		return errNoFile
	case err != nil:
		return fmt.Errorf("config file %q (%s): %w", path, origin, err)
	case st.IsDir():
		return fmt.Errorf("config file %q (%s): is a directory, want a file", path, origin)
	case st.Mode()&fs.ModeSocket != 0:
		return fmt.Errorf("config file %q (%s): is a socket, want a file", path, origin)
	}
	return nil
}
