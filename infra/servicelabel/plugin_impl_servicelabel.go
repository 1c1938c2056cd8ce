package servicelabel

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/contiv-ipam/agent/infra"
	"github.com/contiv-ipam/agent/infra/config"
)

// LabelFlag is the flag (env MICROSERVICE_LABEL) that names the agent.
const LabelFlag = "microservice-label"

// Deps are the plugin's dependencies; it needs nothing but the basics.
type Deps struct {
	infra.PluginDeps
}

// Plugin resolves the agent's label in Init. Build it with NewPlugin.
type Plugin struct {
	Deps

	fixed *string       // from UseLabel
	flags *flag.FlagSet // from RegisterFlags
	label string        // set by Init
}

var (
	_ infra.Plugin         = (*Plugin)(nil)
	_ config.FlagRegistrar = (*Plugin)(nil)
	_ ReaderAPI            = (*Plugin)(nil)
)

// RegisterFlags adds -microservice-label to fs. The plugin has no config
// file, so it adds no -servicelabel-config.
func (p *Plugin) RegisterFlags(fs *flag.FlagSet) {
	if fs.Lookup(LabelFlag) == nil {
		fs.String(LabelFlag, "", "label of this agent in the key-value store (env MICROSERVICE_LABEL; default: the host name)")
	}
	p.flags = fs
}

// Init resolves and validates the label.
func (p *Plugin) Init() error {
	label, source, err := p.resolve()
	if err != nil {
		return err
	}
	if err := ValidateLabel(label); err != nil {
		return fmt.Errorf("%s: %w", source, err)
	}
	p.label = label
	p.Log.Info("agent label", "label", label, "from", source)
	return nil
}

// resolve returns the label and where it came from.
func (p *Plugin) resolve() (label, source string, err error) {
	if p.fixed != nil {
		return *p.fixed, "option UseLabel", nil
	}
	if v, explicit := config.Lookup(p.flags, LabelFlag, "", nil); explicit {
		return v, fmt.Sprintf("flag -%s / env %s", LabelFlag, config.EnvName(LabelFlag)), nil
	}
	host, err := os.Hostname()
	if err != nil {
		return "", "", fmt.Errorf("no -%s given and the host name is unknown: %w", LabelFlag, err)
	}
	return host, "host name", nil
}

// ValidateLabel accepts a non-empty label without '/' or white space, so
// that the agent prefix is exactly one key segment.
func ValidateLabel(label string) error {
	switch {
	case label == "":
		return errors.New("empty agent label")
	case strings.ContainsAny(label, "/ \t\r\n"):
		return fmt.Errorf("agent label %q must not contain '/' or white space", label)
	}
	return nil
}

// GetAgentLabel implements ReaderAPI.
func (p *Plugin) GetAgentLabel() string { return p.label }

// GetAgentPrefix implements ReaderAPI.
func (p *Plugin) GetAgentPrefix() string { return p.GetDifferentAgentPrefix(p.label) }

// GetDifferentAgentPrefix implements ReaderAPI.
func (p *Plugin) GetDifferentAgentPrefix(label string) string { return AllAgentsPrefix + label + "/" }

// GetAllAgentsPrefix implements ReaderAPI.
func (p *Plugin) GetAllAgentsPrefix() string { return AllAgentsPrefix }
