package podmanager

import (
	"context"
	"time"
)

// UseRuntime replaces the CRI client that criSocket would make (tests:
// a runtime that fails the way a real one does). It takes effect only
// with a criSocket set.
func UseRuntime(r Runtime) Option { return func(p *Plugin) { p.runtime = r } }

// startRuntime wires the runtime witness in Init: the CRI client for
// criSocket (unless UseRuntime gave one), and IPAM told to use it.
func (p *Plugin) startRuntime() error {
	if p.cfg.CRISocket == "" {
		p.runtime = nil
		return nil
	}
	if p.runtime == nil {
		p.runtime = newCRIRuntime(p.cfg.CRISocket, p.cfg.CRITimeout)
	}
	p.metrics.runtimeOn = true
	if w, ok := p.IPAM.(RuntimeWitness); ok {
		return w.UseRuntime(p.cfg.CRIGCPeriod)
	}
	return nil
}

// adoptRuntimePods rebuilds the local pods from the runtime's sandboxes
// (AfterInit, before the socket serves: no event can change the table
// meanwhile). A runtime that cannot be asked leaves the table empty: it
// fills with the next Adds, as without a runtime.
func (p *Plugin) adoptRuntimePods() {
	if p.runtime == nil {
		return
	}
	sbs, err := p.listSandboxes(p.life)
	if err != nil {
		return
	}
	n := p.pods.adopt(sbs)
	p.Log.Info("local pods rebuilt from the container runtime's sandboxes", "sandboxes", len(sbs), "pods", n)
}

// listSandboxes asks the runtime, counts the answer, and logs a change
// of whether it answers.
func (p *Plugin) listSandboxes(ctx context.Context) ([]Sandbox, error) {
	sbs, err := p.runtime.ListSandboxes(ctx)
	up := err == nil
	if up {
		p.metrics.runtimeLists.WithLabelValues("ok").Inc()
		p.metrics.runtimeUp.Set(1)
	} else {
		p.metrics.runtimeLists.WithLabelValues("error").Inc()
		p.metrics.runtimeUp.Set(0)
	}
	p.runtimeMu.Lock()
	changed := p.runtimeKnown && p.runtimeWasUp != up || !p.runtimeKnown && !up
	p.runtimeKnown, p.runtimeWasUp = true, up
	p.runtimeMu.Unlock()
	switch {
	case changed && up:
		p.Log.Info("the container runtime answers again", "criSocket", p.cfg.CRISocket)
	case changed:
		p.Log.Warn("the container runtime cannot be asked: no pod missing from Kubernetes is released until it answers",
			"criSocket", p.cfg.CRISocket, "error", err)
	}
	return sbs, err
}

// runtimeLoop looks at the runtime every criListPeriod until the plugin
// closes: IPAM (when it is a RuntimeWitness) takes each list.
func (p *Plugin) runtimeLoop(done chan<- struct{}) {
	defer close(done)
	w, _ := p.IPAM.(RuntimeWitness)
	tick := time.NewTicker(p.cfg.CRIListPeriod)
	defer tick.Stop()
	for {
		p.lookAtRuntime(w)
		select {
		case <-p.life.Done():
			return
		case <-tick.C:
		}
	}
}

func (p *Plugin) lookAtRuntime(w RuntimeWitness) {
	if w == nil {
		_, _ = p.listSandboxes(p.life)
		return
	}
	if err := w.LookAtRuntime(p.life, p.listSandboxes); err != nil && p.life.Err() == nil {
		p.Log.Warn("IPAM did not take the container runtime's list", "error", err)
	}
}
