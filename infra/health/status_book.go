package health

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// statusBook keeps the last known state of every plugin and the agent
// state derived from them. It is safe for concurrent use.
type statusBook struct {
	now func() time.Time

	mu       sync.Mutex
	agent    AgentStatus // Plugins and NonFatal are filled by snapshot
	plugins  map[string]*entry
	nonFatal map[string]bool
}

type entry struct {
	status PluginStatus
	probe  Probe
}

func newStatusBook(now func() time.Time) *statusBook {
	t := now()
	return &statusBook{
		now:      now,
		agent:    AgentStatus{State: OK, StartTime: t, LastChange: t, LastUpdate: t},
		plugins:  map[string]*entry{},
		nonFatal: map[string]bool{},
	}
}

// register adds name in state Init, or only replaces the probe when name
// is known already; liveness marks the plugin as part of the liveness (it
// is never unmarked).
func (b *statusBook) register(name string, probe Probe, liveness bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.now()
	e, ok := b.plugins[name]
	if ok {
		e.probe = probe
	} else {
		e = &entry{status: PluginStatus{Name: name, State: Init, LastChange: t, LastUpdate: t}, probe: probe}
		b.plugins[name] = e
	}
	e.status.Liveness = e.status.Liveness || liveness
	b.recompute(t)
}

// report records a plugin's state, adding the plugin when it is unknown.
// It returns whether the state or error changed.
func (b *statusBook) report(name string, state State, err error) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.now()
	e, ok := b.plugins[name]
	if !ok {
		e = &entry{status: PluginStatus{Name: name, State: state, LastChange: t}}
		b.plugins[name] = e
	}
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	changed := !ok || e.status.State != state || e.status.Error != msg
	if changed {
		e.status.State, e.status.Error, e.status.LastChange = state, msg, t
	}
	e.status.LastUpdate = t
	b.recompute(t)
	return changed
}

// setNonFatal replaces the set of plugins whose state does not count.
func (b *statusBook) setNonFatal(names []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.nonFatal = make(map[string]bool, len(names))
	for _, n := range names {
		b.nonFatal[n] = true
	}
	b.recompute(b.now())
}

func (b *statusBook) setBuildInfo(bi BuildInfo) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.agent.BuildInfo = bi
}

// recompute sets the agent state to the worst state of the fatal plugins
// (OK when there are none), and the liveness to Error when a fatal
// liveness plugin is in Error. Call with mu held.
func (b *statusBook) recompute(t time.Time) {
	worst, live := OK, OK
	for name, e := range b.plugins {
		if b.nonFatal[name] {
			continue
		}
		worst = max(worst, e.status.State)
		if e.status.Liveness && e.status.State == Error {
			live = Error
		}
	}
	if worst != b.agent.State || live != b.agent.Live {
		b.agent.State, b.agent.Live, b.agent.LastChange = worst, live, t
	}
	b.agent.LastUpdate = t
}

// snapshot returns a copy of the agent status, plugins sorted by name.
func (b *statusBook) snapshot() AgentStatus {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.agent
	s.Plugins = b.pluginsLocked()
	for n := range b.nonFatal {
		s.NonFatal = append(s.NonFatal, n)
	}
	slices.Sort(s.NonFatal)
	return s
}

func (b *statusBook) allPlugins() []PluginStatus {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pluginsLocked()
}

func (b *statusBook) pluginsLocked() []PluginStatus {
	out := make([]PluginStatus, 0, len(b.plugins))
	for _, e := range b.plugins {
		out = append(out, e.status)
	}
	slices.SortFunc(out, func(x, y PluginStatus) int { return cmp.Compare(x.Name, y.Name) })
	return out
}

// probes returns the registered probes by plugin name, sorted by name.
func (b *statusBook) probes() []namedProbe {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []namedProbe
	for name, e := range b.plugins {
		if e.probe != nil {
			out = append(out, namedProbe{name: name, probe: e.probe})
		}
	}
	slices.SortFunc(out, func(x, y namedProbe) int { return cmp.Compare(x.name, y.name) })
	return out
}

type namedProbe struct {
	name  string
	probe Probe
}
