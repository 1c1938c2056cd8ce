package ipam

import (
	"fmt"
	"net/netip"

	"github.com/contiv-ipam/agent/plugins/controller/api"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/nodesync"
)

// HandlesEvent selects every resync, NodeUpdate of this node with external
// IPAM (it may move the pod CIDR), and changes of Kubernetes pods (a pod
// deleted from Kubernetes gives its address back).
func (p *Plugin) HandlesEvent(ev api.Event) bool {
	if ev.Method() != api.Update {
		return true
	}
	switch e := ev.(type) {
	case *nodesync.NodeUpdate:
		return p.externalIPAM() && e.NodeName == p.ServiceLabel.GetAgentLabel()
	case *api.KubeStateChange:
		return e.Resource == podResource
	}
	return false
}

// externalIPAM tells whether the current config uses an external IPAM.
func (p *Plugin) externalIPAM() bool {
	cfg := p.ContivConf.GetIPAMConfig()
	return cfg != nil && cfg.UseExternalIPAM
}

// Resync (re)initialises IPAM at the first resync, at healing resyncs and
// at PodCIDRChange; later DB resyncs (etcd reconnects) keep the state.
// Allocations are rebuilt from bolt and from the pods in the Kubernetes
// state. Every error is fatal: the agent cannot run without addresses.
func (p *Plugin) Resync(ev api.Event, ks api.KubeStateData, resyncCount int, _ api.ResyncOperations) error {
	if resyncCount > 1 && !reinitialises(ev) && p.ready() {
		return nil
	}
	st, err := p.newState(ks)
	if err != nil {
		return api.NewFatalError(fmt.Errorf("ipam resync: %w", err))
	}
	stale, learned, err := p.restore(st, ks)
	if err != nil {
		return api.NewFatalError(fmt.Errorf("ipam resync: %w", err))
	}
	// Log before publishing: st is shared with API callers from then on.
	p.Log.Info("ipam initialised", "node-id", st.nodeID, "pod-subnet", st.podThis.String(),
		"gateway", st.podGW.String(), "vpp-host-subnet", st.hostThis.String(),
		"allocated", st.pool.Len()+len(st.external), "event", ev.GetName())
	p.mu.Lock()
	p.st = st
	p.mu.Unlock()
	p.tidyRecords(stale, learned)
	return nil
}

// reinitialises tells whether ev rebuilds IPAM even after the first resync.
func reinitialises(ev api.Event) bool {
	switch ev.(type) {
	case *api.HealingResync, *PodCIDRChange:
		return true
	}
	return false
}

func (p *Plugin) ready() bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.st != nil
}

// newState derives the addresses of this node.
func (p *Plugin) newState(ks api.KubeStateData) (*state, error) {
	cfg := p.ContivConf.GetIPAMConfig()
	if cfg == nil {
		return nil, fmt.Errorf("contivconf has no IPAM config")
	}
	return buildState(cfg, p.NodeSync.GetNodeID(), p.ServiceLabel.GetAgentLabel(), p.ContivConf.GetStaticDefaultGW(), ks)
}

// restore claims in st the addresses of the pods in the Kubernetes state
// (they are in use) and then those stored in bolt. It returns the stored
// records that no longer hold (outside the pod subnet, or the address is
// used by another pod) and the pods learned from Kubernetes only.
func (p *Plugin) restore(st *state, ks api.KubeStateData) (stale []podmodel.ID, learned map[podmodel.ID]netip.Addr, err error) {
	stored, err := p.storedAllocations()
	if err != nil {
		return nil, nil, err
	}
	learned = map[podmodel.ID]netip.Addr{}
	for _, v := range ks[podResource] {
		pod, ok := v.(*podmodel.Pod)
		if !ok {
			continue
		}
		id := podmodel.GetID(pod)
		a, err := netip.ParseAddr(pod.GetIpAddress())
		if err != nil || !st.podThis.Contains(a) || checkPodID(id) != nil {
			continue
		}
		if err := st.claim(id, a); err != nil {
			p.Log.Warn("pod address from Kubernetes not restored", "pod", id.String(), "error", err)
			continue
		}
		if stored[id] != a {
			learned[id] = a
		}
	}
	for id, a := range stored {
		if held, ok := st.lookup(id); ok {
			if held != a {
				stale = append(stale, id) // Kubernetes knows better; the record is rewritten
			}
			continue
		}
		if !st.podThis.Contains(a) {
			stale = append(stale, id)
			continue
		}
		if err := st.claim(id, a); err != nil {
			p.Log.Warn("stored pod address not restored", "pod", id.String(), "error", err)
			stale = append(stale, id)
		}
	}
	st.raiseCursor()
	return stale, learned, nil
}

// claim records a known allocation.
func (st *state) claim(id podmodel.ID, a netip.Addr) error {
	if st.cfg.UseExternalIPAM {
		st.external[id] = a
		return nil
	}
	return st.pool.AssignAddr(id, a)
}

// raiseCursor continues next-fit after the highest restored address, as
// the original did after a restart (with IPv4 offsets computed right:
// spec §2.16 bug 1 fixed).
func (st *state) raiseCursor() {
	var top netip.Addr
	st.pool.Range(func(_ podmodel.ID, a netip.Addr) bool {
		top = a
		return true
	})
	if top.IsValid() {
		_ = st.pool.Pool().SetCursor(top)
	}
}

// tidyRecords deletes stale allocation records and stores the ones learned
// from Kubernetes. Failures are logged: the in-memory state is right and
// the next resync retries.
func (p *Plugin) tidyRecords(stale []podmodel.ID, learned map[podmodel.ID]netip.Addr) {
	for _, id := range stale {
		if _, ok := learned[id]; ok {
			continue
		}
		if err := p.unpersist(id); err != nil {
			p.Log.Warn("deleting a stale pod allocation record", "pod", id.String(), "error", err)
		}
	}
	for id, a := range learned {
		if err := p.persist(id, a); err != nil {
			p.Log.Warn("storing a pod allocation learned from Kubernetes", "pod", id.String(), "error", err)
		}
	}
}

// Update pushes PodCIDRChange when the Kubernetes pod CIDR of this node
// differs from the pod subnet in use (compared by value: spec §2.16 bug
// 2 fixed), and gives back the address of a pod deleted from Kubernetes.
func (p *Plugin) Update(ev api.Event, _ api.UpdateOperations) (string, error) {
	switch e := ev.(type) {
	case *nodesync.NodeUpdate:
		return p.nodeUpdate(e)
	case *api.KubeStateChange:
		return p.podChange(e)
	}
	return "", nil
}

func (p *Plugin) nodeUpdate(e *nodesync.NodeUpdate) (string, error) {
	if e.NewState == nil || e.NewState.PodCIDR == nil {
		return "", nil
	}
	next, ok := toPrefix(e.NewState.PodCIDR)
	if !ok {
		return "", fmt.Errorf("node %s: pod CIDR %v is not a valid subnet", e.NodeName, e.NewState.PodCIDR)
	}
	var current netip.Prefix
	p.read(func(st *state) { current = st.podThis })
	if next == current {
		return "", nil
	}
	if p.EventLoop == nil {
		return "", fmt.Errorf("pod CIDR of this node moved to %s but ipam has no EventLoop to resync", next)
	}
	if err := p.EventLoop.PushEvent(&PodCIDRChange{LocalPodCIDR: toIPNet(next)}); err != nil {
		return "", fmt.Errorf("pushing PodCIDRChange to %s: %w", next, err)
	}
	p.Log.Info("sent PodCIDRChange", "from", current.String(), "to", next.String())
	return fmt.Sprintf("pod CIDR %s -> %s: PodCIDRChange sent", current, next), nil
}

// podChange releases the address of a pod deleted from Kubernetes.
func (p *Plugin) podChange(e *api.KubeStateChange) (string, error) {
	if e.NewValue != nil {
		return "", nil
	}
	pod, ok := e.PrevValue.(*podmodel.Pod)
	if !ok {
		return "", nil
	}
	id := podmodel.GetID(pod)
	if p.GetPodIP(id) == nil {
		return "", nil
	}
	if err := p.ReleasePodIP(id); err != nil {
		return "", err
	}
	return fmt.Sprintf("released the address of deleted pod %s", id), nil
}

// Revert does nothing: Update changes nothing that a later handler's
// failure would need undone.
func (p *Plugin) Revert(api.Event) error { return nil }
