package manifests

import (
	"fmt"
	"slices"
	"testing"
)

// checkEnvNames: every variable the agent's and contiv-ksr's containers
// set is one the binary reads (a flag's, or one of the runner's), except
// in the init container (a shell script's own).
func checkEnvNames(t *testing.T, b *bundle) []error {
	cs, err := components(b)
	if err != nil {
		return []error{err}
	}
	var errs []error
	for _, c := range cs {
		reads := binaryEnv(t, c.name)
		for _, e := range c.main.Env {
			if !slices.Contains(reads, e.Name) {
				errs = append(errs, fmt.Errorf("%s sets %s, which %s does not read (it reads %v)",
					c.at("containers[%s].env", c.name), e.Name, c.name, reads))
			}
		}
	}
	return errs
}
