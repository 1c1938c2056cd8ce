package logmanager

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/contiv-ipam/agent/infra"
	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/logging"
	"github.com/contiv-ipam/agent/infra/rest"
)

// Deps are the plugin's dependencies. PluginDeps.LogRegistry is the registry
// whose levels are managed (nil: logging.Default()).
type Deps struct {
	infra.PluginDeps
	// HTTP serves the REST endpoints; nil means none.
	HTTP rest.HTTPHandlers
}

// Plugin manages logger levels. Build it with NewPlugin.
type Plugin struct {
	Deps

	fixedConf *Config // from UseConf
}

var (
	_ infra.Plugin = (*Plugin)(nil)
	_ API          = (*Plugin)(nil)
)

// Init applies the configured levels and registers the REST endpoints.
func (p *Plugin) Init() error {
	conf, err := p.loadConfig()
	if err != nil {
		return err
	}
	if err := p.applyDefault(conf.DefaultLevel); err != nil {
		return err
	}
	for i, l := range conf.Loggers {
		if err := p.registry().SetLevel(l.Name, l.Level); err != nil {
			return fmt.Errorf("loggers[%d] (logger %q, level %q): %w", i, l.Name, l.Level, err)
		}
	}
	if p.HTTP != nil {
		p.registerHandlers()
	}
	return nil
}

func (p *Plugin) loadConfig() (Config, error) {
	return config.LoadOrFixed(p.Cfg, p.fixedConf, DefaultConfig())
}

// applyDefault sets the default level from INITIAL_LOGLVL or, when that is
// unset, from the config; neither set changes nothing.
func (p *Plugin) applyDefault(fromConfig string) error {
	name, source := fromConfig, "default-level"
	if v, ok := os.LookupEnv(logging.EnvInitialLevel); ok && v != "" {
		name, source = v, "env "+logging.EnvInitialLevel
	}
	if name == "" {
		return nil
	}
	lvl, err := logging.ParseLevel(name)
	if err != nil {
		return fmt.Errorf("%s: %w", source, err)
	}
	p.registry().SetAllLevels(lvl)
	p.Log.Info("default log level set", "level", logging.LevelName(lvl), "from", source)
	return nil
}

// registry returns the registry whose levels are managed.
func (p *Plugin) registry() *logging.Registry {
	if p.LogRegistry != nil {
		return p.LogRegistry
	}
	return logging.Default()
}

// ListLoggers implements API.
func (p *Plugin) ListLoggers() []LoggerLevel {
	reg := p.registry()
	levels := reg.ListLoggers()
	out := make([]LoggerLevel, 0, len(levels))
	for _, name := range reg.Names() {
		if lvl, ok := levels[name]; ok {
			out = append(out, LoggerLevel{Logger: name, Level: lvl})
		}
	}
	return out
}

// SetLevel implements API.
func (p *Plugin) SetLevel(logger, level string) (LoggerLevel, error) {
	if err := p.registry().SetLevel(logger, level); err != nil {
		return LoggerLevel{}, fmt.Errorf("logger %q: %w", logger, err)
	}
	lvl, _ := logging.ParseLevel(level) // SetLevel has parsed it
	p.Log.Info("log level changed", slog.String("logger", logger), slog.String("level", logging.LevelName(lvl)))
	return LoggerLevel{Logger: logger, Level: logging.LevelName(lvl)}, nil
}
