package contivconf

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/contiv-ipam/agent/infra/health"
)

// reporting counts the NodeConfig CRD values that could not be used and
// tells the health plugin while the plugin waits for a valid one.
type reporting struct {
	invalid prometheus.Counter
}

// initReporting registers the metric and the health state (ok: the file's
// configuration is valid, Init checked it).
func (p *Plugin) initReporting() error {
	p.report.invalid = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "contiv_contivconf_invalid_node_configs_total",
		Help: "NodeConfig CRD values of this node that did not convert or validate and were ignored.",
	})
	if p.Metrics != nil {
		if err := p.Metrics.Register(p.report.invalid); err != nil {
			return fmt.Errorf("registering contivconf metrics: %w", err)
		}
	}
	if p.StatusCheck != nil {
		p.StatusCheck.Register(p.String(), nil)
		p.StatusCheck.ReportStateChange(p.String(), health.OK, nil)
	}
	return nil
}

// invalidCRD logs and counts a NodeConfig CRD value that cannot be used.
// With a good CRD value in use it stays; without one the plugin reports
// itself not ready (the node runs on contiv.conf's entry meanwhile).
func (p *Plugin) invalidCRD(err error) {
	p.report.invalid.Inc()
	p.mu.RLock()
	inUse := p.crdNode != nil
	p.mu.RUnlock()
	if inUse {
		p.Log.Error("invalid NodeConfig CRD ignored; the one in use stays", "error", err)
		return
	}
	p.Log.Error("invalid NodeConfig CRD ignored; waiting for a valid one (contiv.conf's nodeConfig applies meanwhile)", "error", err)
	if p.StatusCheck != nil {
		p.StatusCheck.ReportStateChange(p.String(), health.Init, fmt.Errorf("waiting for a valid NodeConfig CRD: %w", err))
	}
}

// validCRD reports the plugin ready again.
func (p *Plugin) validCRD() {
	if p.StatusCheck != nil {
		p.StatusCheck.ReportStateChange(p.String(), health.OK, nil)
	}
}
