package nodesync

import (
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/kvdb"
)

// Command-line flags of the plugin (each with an environment fallback,
// see config.EnvName). The plugin has no config file: its two settings
// are operator actions and deployment tunables, not cluster config.
const (
	// AcceptNodeIDChangeFlag (env ACCEPT_NODE_ID_CHANGE) lets the agent
	// start with another node ID than the one it last ran with.
	AcceptNodeIDChangeFlag = "accept-node-id-change"
	// PresenceTTLFlag (env NODESYNC_PRESENCE_TTL) is the lease TTL of this
	// agent's presence key.
	PresenceTTLFlag = "nodesync-presence-ttl"
)

// DefaultPresenceTTL is how long the presence key of a killed agent
// outlives it: a successor with the same node name on another bolt file
// waits at most that long (one on the same bolt file takes the key over
// at once, see InstanceKey).
const DefaultPresenceTTL = 15 * time.Second

// Config are the plugin's settings.
type Config struct {
	// PresenceTTL is the lease TTL of the presence key that tells other
	// agents this node name is served (whole seconds, at least 1s).
	PresenceTTL time.Duration
	// AcceptNodeIDChange accepts a claimed node ID that differs from the
	// one stored in LocalDB: the new ID is stored and the agent goes on.
	AcceptNodeIDChange bool
}

// DefaultConfig returns the settings used when no flag is given.
func DefaultConfig() Config { return Config{PresenceTTL: DefaultPresenceTTL} }

// Validate checks every setting; errors name the flag and the value.
func (c *Config) Validate() error {
	if c.PresenceTTL < kvdb.MinPresenceTTL {
		return fmt.Errorf("-%s: %s, want at least %s", PresenceTTLFlag, c.PresenceTTL, kvdb.MinPresenceTTL)
	}
	return nil
}

// RegisterFlags adds -accept-node-id-change and -nodesync-presence-ttl to
// the agent's command line (plus the config-file flag of every plugin).
func (p *Plugin) RegisterFlags(fs *flag.FlagSet) {
	p.Deps.RegisterFlags(fs)
	if fs.Lookup(AcceptNodeIDChangeFlag) == nil {
		fs.Bool(AcceptNodeIDChangeFlag, false, fmt.Sprintf(
			"start even if the node ID claimed in etcd differs from the one this node last ran with; the new ID is stored (env %s)",
			config.EnvName(AcceptNodeIDChangeFlag)))
	}
	if fs.Lookup(PresenceTTLFlag) == nil {
		fs.Duration(PresenceTTLFlag, DefaultPresenceTTL, fmt.Sprintf(
			"lease TTL of this agent's presence key: how long a killed agent keeps its node name from a successor on another bolt file (env %s)",
			config.EnvName(PresenceTTLFlag)))
	}
	p.flags = fs
}

// loadConfig starts from UseConf's config (else DefaultConfig) and applies
// the flags and environment variables that were set.
func (p *Plugin) loadConfig() (Config, error) {
	cfg := DefaultConfig()
	if p.base != nil {
		cfg = *p.base
	}
	source := func(name string) string {
		return fmt.Sprintf("flag -%s / env %s", name, config.EnvName(name))
	}
	if v, set := config.Lookup(p.flags, AcceptNodeIDChangeFlag, "", p.env); set {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return Config{}, fmt.Errorf("%s: %q is not a boolean (true or false)", source(AcceptNodeIDChangeFlag), v)
		}
		cfg.AcceptNodeIDChange = b
	}
	if v, set := config.Lookup(p.flags, PresenceTTLFlag, "", p.env); set {
		d, err := time.ParseDuration(v)
		if err != nil {
			return Config{}, fmt.Errorf("%s: %q is not a duration such as \"15s\"", source(PresenceTTLFlag), v)
		}
		cfg.PresenceTTL = d
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, fmt.Errorf("nodesync: %w", err)
	}
	return cfg, nil
}
