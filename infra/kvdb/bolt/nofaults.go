//go:build !faults

package bolt

import "fmt"

// FaultsBuild tells whether this binary was built with the faults tag.
const FaultsBuild = false

// faultHook refuses StallEnv: this binary has no fault injection (see
// faults.go), and a test that asks for it must not pass without it.
func (p *Plugin) faultHook() (func(int), error) {
	if spec, ok := p.env(StallEnv); ok && spec != "" {
		return nil, fmt.Errorf("%s=%q is set, but this binary was built without the faults tag (go build -tags faults)", StallEnv, spec)
	}
	return nil, nil
}
