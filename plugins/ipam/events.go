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

// Resync (re)initialises IPAM at every resync: the addressing is derived
// again, and the keeper rebuilds the pod addresses from the store and the
// Kubernetes state once the writes in flight are durable (see doc.go).
// Every error is fatal: the agent cannot run without addresses.
func (p *Plugin) Resync(ev api.Event, ks api.KubeStateData, _ int, _ api.ResyncOperations) error {
	st, err := p.newState(ks)
	if err != nil {
		return api.NewFatalError(fmt.Errorf("ipam resync: %w", err))
	}
	in := &resyncInput{st: st, ks: ks, live: liveness(ev), event: ev.GetName()}
	if err := p.keeper.do(&request{kind: reqResync, rs: in}).err; err != nil {
		return api.NewFatalError(fmt.Errorf("ipam resync: %w", err))
	}
	p.st.Store(st)
	return nil
}

// liveness tells whether the Kubernetes state of ev comes from etcd: a DB
// resync says so; other resyncs keep what the last DB resync said.
func liveness(ev api.Event) *bool {
	db, ok := ev.(*api.DBResync)
	if !ok {
		return nil
	}
	live := !db.Local
	return &live
}

// newState derives the addresses of this node.
func (p *Plugin) newState(ks api.KubeStateData) (*state, error) {
	cfg := p.ContivConf.GetIPAMConfig()
	if cfg == nil {
		return nil, fmt.Errorf("contivconf has no IPAM config")
	}
	return buildState(cfg, p.NodeSync.GetNodeID(), p.ServiceLabel.GetAgentLabel(), p.ContivConf.GetStaticDefaultGW(), ks)
}

// Update pushes PodCIDRChange when the Kubernetes pod CIDR of this node
// differs from the pod subnet in use (compared by value: spec §2.16 bug
// 2 fixed), and gives back the address of a pod deleted from Kubernetes.
func (p *Plugin) Update(ev api.Event, txn api.UpdateOperations) (string, error) {
	switch e := ev.(type) {
	case *nodesync.NodeUpdate:
		return p.nodeUpdate(e, txn)
	case *api.KubeStateChange:
		return p.podChange(e)
	}
	return "", nil
}

func (p *Plugin) nodeUpdate(e *nodesync.NodeUpdate, txn api.UpdateOperations) (string, error) {
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
	if err := txn.PushFollowUp(&PodCIDRChange{LocalPodCIDR: toIPNet(next)}); err != nil {
		return "", fmt.Errorf("pushing PodCIDRChange to %s: %w", next, err)
	}
	p.Log.Info("sent PodCIDRChange", "from", current.String(), "to", next.String())
	return fmt.Sprintf("pod CIDR %s -> %s: PodCIDRChange sent", current, next), nil
}

// podChange tells the keeper about a pod of the Kubernetes state: a
// deleted pod gives its address back (once the delete of its record is
// durable); a pod that is there stops its grace period.
func (p *Plugin) podChange(e *api.KubeStateChange) (string, error) {
	if e.NewValue != nil {
		if pod, ok := e.NewValue.(*podmodel.Pod); ok {
			return "", p.keeper.do(&request{kind: reqPodSeen, pod: podmodel.GetID(pod)}).err
		}
		return "", nil
	}
	pod, ok := e.PrevValue.(*podmodel.Pod)
	if !ok {
		return "", nil
	}
	id := podmodel.GetID(pod)
	rep := p.keeper.do(&request{kind: reqPodGone, pod: id})
	if rep.err != nil || !rep.held {
		return "", rep.err
	}
	return fmt.Sprintf("released the address %s of deleted pod %s", rep.addr, id), nil
}

// Revert does nothing: Update changes nothing that a later handler's
// failure would need undone.
func (p *Plugin) Revert(api.Event) error { return nil }
