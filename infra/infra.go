// Package infra defines what a plugin is.
//
// A plugin is a struct with a unique name, Init and Close, and optionally
// AfterInit. It lists the plugins it needs as exported fields typed by their
// API interfaces, usually grouped in an embedded Deps struct that embeds
// PluginDeps. The agent (infra/agent) finds plugins through those fields,
// orders them dependencies first, and calls:
//  1. Init on every plugin, in order;
//  2. AfterInit on every plugin that has it, in order, only after every Init
//     succeeded;
//  3. Close on every started plugin, in reverse order, at shutdown or when a
//     step of 1–2 failed.
//
// By convention Init builds state and registers with other plugins (REST
// handlers, event handlers); AfterInit starts serving and background loops.
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
// logger and its config accessor.
type PluginDeps struct {
	PluginName
	Log *slog.Logger
	Cfg config.PluginConfig
	// LogRegistry is where Setup takes the logger from; nil means
	// logging.Default().
	LogRegistry *logging.Registry
}

// Setup fills Log and Cfg when they are still nil. Set the name first.
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

// Close does nothing; plugins with resources define their own.
func (d *PluginDeps) Close() error { return nil }
