package metrics

import "github.com/prometheus/client_golang/prometheus"

// API is what other plugins use to export metrics.
type API interface {
	// Registerer returns the plugin's registry for registering collectors.
	Registerer() prometheus.Registerer
	// Register adds c to the plugin's registry; registering the same
	// collector twice is an error (prometheus.AlreadyRegisteredError).
	Register(c prometheus.Collector) error
}
