// Package infra defines what a plugin is.
//
// A plugin is a struct with a unique name, Init and Close, and optionally
// AfterInit. It lists the plugins it needs as exported fields typed by their
// API interfaces, usually grouped in an embedded Deps struct that embeds
// PluginDeps. The agent (infra/agent) finds plugins through those fields,
// orders them dependencies first, and calls:
//  1. LoadConfig on every plugin that has it (ConfigLoader), in order,
//     before any Init: a config that cannot be right stops the agent before
//     any plugin has created anything (a file, a directory, a socket);
//  2. Init on every plugin, in order, only after every LoadConfig
//     succeeded;
//  3. AfterInit on every plugin that has it, in order, only after every Init
//     succeeded;
//  4. Close on every plugin whose Init was called, in reverse order, at
//     shutdown or when a step of 2–3 failed (a failed step 1 closes nothing).
//
// By convention LoadConfig reads and validates the plugin's config and
// keeps it for Init; Init builds state and registers with other plugins
// (REST handlers, event handlers); AfterInit starts serving and background
// loops. Every plugin that embeds PluginDeps has a LoadConfig that finds
// and reads its file and checks the YAML syntax (config.Checker); a plugin
// that can decode and validate its config before Init defines its own.
//
// A plugin that reads no config file sets Cfg = config.NoFile before Setup:
// it then has no -<name>-config flag and nothing to check.
package infra

import (
	"flag"
	"log/slog"

	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/logging"
)

// Plugin is the unit the agent starts and stops.
type Plugin interface {
	// Init prepares the plugin; dependencies are already initialised.
	Init() error
	// Close releases everything the plugin holds; it must be safe to call
	// after a failed Init.
	Close() error
	// String returns the plugin's unique name, which also names its logger
	// and its config file.
	String() string
}

// ConfigLoader is implemented by plugins that load their config before
// any plugin's Init. LoadConfig must create nothing (no file, directory,
// socket or goroutine) and must not use other plugins, which are not
// initialised yet; Init then uses what LoadConfig loaded (and loads it
// itself when LoadConfig was not called, as in unit tests).
type ConfigLoader interface {
	LoadConfig() error
}

// PostInit is implemented by plugins that start work after every plugin's Init.
type PostInit interface {
	AfterInit() error
}

// PluginName gives a plugin its String method when embedded.
type PluginName string

// String returns the name.
func (n *PluginName) String() string { return string(*n) }

// SetName sets the name; call it before PluginDeps.Setup.
func (n *PluginName) SetName(name string) { *n = PluginName(name) }

// PluginDeps is the dependency bundle every plugin embeds: its name, its
// logger and its config accessor (config.ForPlugin(name) by default,
// config.NoFile for a plugin without a file).
type PluginDeps struct {
	PluginName
	Log *slog.Logger
	Cfg config.PluginConfig
	// LogRegistry is where Setup takes the logger from; nil means
	// logging.Default().
	LogRegistry *logging.Registry
}

// Setup fills Log and Cfg when they are still nil (Cfg with
// config.ForPlugin(name)). Set the name first.
func (d *PluginDeps) Setup() {
	d.SetupLog()
	if d.Cfg == nil {
		d.Cfg = config.ForPlugin(d.String())
	}
}

// SetupLog fills Log when it is still nil.
func (d *PluginDeps) SetupLog() {
	if d.Log != nil {
		return
	}
	reg := d.LogRegistry
	if reg == nil {
		reg = logging.Default()
	}
	d.Log = reg.Logger(d.String())
}

// RegisterFlags adds the plugin's config flags to the agent's command line.
func (d *PluginDeps) RegisterFlags(fs *flag.FlagSet) {
	if r, ok := d.Cfg.(config.FlagRegistrar); ok {
		r.RegisterFlags(fs)
	}
}

// LoadConfig is the default ConfigLoader step: when Cfg has a file
// (config.Checker), it finds and reads it and checks its YAML syntax, so
// that a missing, unreadable or broken file stops the agent before any
// Init. Init's LoadValue then decodes the bytes read here. A plugin that
// decodes and validates its config ahead of Init defines its own.
func (d *PluginDeps) LoadConfig() error {
	if c, ok := d.Cfg.(config.Checker); ok {
		return c.Check()
	}
	return nil
}

// Close does nothing; plugins with resources define their own.
func (d *PluginDeps) Close() error { return nil }
