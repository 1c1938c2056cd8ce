// Package namekey builds and parses the keys of Kubernetes resources that
// are named by one key segment: <prefix><name> (nodes, namespaces).
package namekey

import (
	"fmt"
	"strings"
)

// Parse returns the name of key: key without prefix. It rejects keys
// without prefix, an empty name and a name with "/". Errors wrap invalid,
// quote key and call the thing named what ("node", "namespace").
func Parse(key, prefix, what string, invalid error) (string, error) {
	name, ok := strings.CutPrefix(key, prefix)
	switch {
	case !ok:
		return "", fmt.Errorf("%w %q: want prefix %q", invalid, key, prefix)
	case name == "":
		return "", fmt.Errorf("%w %q: empty %s name", invalid, key, what)
	case strings.Contains(name, "/"):
		return "", fmt.Errorf("%w %q: %s name contains \"/\"", invalid, key, what)
	}
	return name, nil
}
