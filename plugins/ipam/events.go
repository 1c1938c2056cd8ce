package ipam

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/contiv-ipam/agent/infra/health"
	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/plugins/contivconf"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ipam/addressing"
	"github.com/contiv-ipam/agent/plugins/ipam/keeper"
	"github.com/contiv-ipam/agent/plugins/ksr/model/mirror"
	"github.com/contiv-ipam/agent/plugins/ksr/model/node"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/ksr/model/poolblock"
	"github.com/contiv-ipam/agent/plugins/nodesync"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// HandlesEvent selects every resync, NodeUpdate of this node with external
// IPAM (it may move the pod CIDR), changes of Kubernetes pods (a pod
// deleted from Kubernetes gives its addresses back), and the CNI events
// of podmanager (AddPod, DeletePod, GCPods).
func (p *Plugin) HandlesEvent(ev api.Event) bool {
	if ev.Method() != api.Update {
		return true
	}
	switch e := ev.(type) {
	case *podmanager.AddPod, *podmanager.DeletePod, *podmanager.GCPods:
		return true
	case *nodesync.NodeUpdate:
		return p.externalIPAM() && e.NodeName == p.ServiceLabel.GetAgentLabel()
	case *api.KubeStateChange:
		return e.Resource == podResource || e.Resource == mirror.Keyword ||
			e.Resource == poolblock.GrantKeyword && e.Key == poolblock.GrantKey(p.ServiceLabel.GetAgentLabel())
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
// An invalid pod CIDR of this node in the Kubernetes state (external IPAM)
// never stops the agent: the last good pod subnet stays; without one
// IPAM waits, unready with the reason, until a valid value arrives. A
// store slower than storeTimeout fails the resync without stopping the
// agent (the controller's healing resync tries again). Every other error
// is fatal: the agent cannot run without addresses.
func (p *Plugin) Resync(ev api.Event, ks api.KubeStateData, _ int, _ api.ResyncOperations) error {
	st, err := p.newState(ks)
	var wait *waitError
	if errors.As(err, &wait) {
		p.waitFor(wait)
		return nil
	}
	if err != nil {
		return api.NewFatalError(fmt.Errorf("ipam resync: %w", err))
	}
	in := &keeper.ResyncInput{State: st, KubeState: ks, Live: liveness(ev), Event: ev.GetName(), HostIPs: p.thisNodeIPs(),
		Exclusions: p.exclusionsFor(st)}
	if err := p.keeper.Do(&keeper.Request{Kind: keeper.ReqResync, Resync: in}).Err; err != nil {
		if storeSlow(err) {
			// A slow disk, not a broken one: the controller's healing
			// resync tries again (and a second failure is fatal).
			return fmt.Errorf("ipam resync: the local store did not answer in time: %w", err)
		}
		return api.NewFatalError(fmt.Errorf("ipam resync: %w", err))
	}
	p.st.Store(st)
	p.setWaiting(nil)
	return nil
}

// storeSlow tells whether err is a store that did not answer within
// storeTimeout (a read waiting for a long commit, a write withdrawn from
// a long queue, a full queue), as opposed to a failed or refused store.
func storeSlow(err error) bool {
	return !errors.Is(err, kvdb.ErrStoreFailed) &&
		(errors.Is(err, context.DeadlineExceeded) || errors.Is(err, kvdb.ErrBusy))
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

// waitError: IPAM cannot initialise before a valid value arrives (this
// node's pod CIDR, or its node ID).
type waitError struct {
	what  string
	cause error
}

func (e *waitError) Error() string { return fmt.Sprintf("IPAM waits for %s: %v", e.what, e.cause) }

func (e *waitError) Unwrap() error { return e.cause }

// errNoNodeID: nodesync has no node ID yet (its claim waits for etcd).
var errNoNodeID = errors.New("nodesync has not claimed it yet")

// newState derives the addresses of this node.
func (p *Plugin) newState(ks api.KubeStateData) (*addressing.State, error) {
	cfg := p.ContivConf.GetIPAMConfig()
	if cfg == nil {
		return nil, fmt.Errorf("contivconf has no IPAM config")
	}
	if p.NodeSync.GetNodeID() == 0 {
		return nil, &waitError{what: "this node's ID", cause: errNoNodeID}
	}
	podThis, err := p.podCIDRFromKube(cfg, ks)
	if err != nil {
		return nil, err
	}
	return addressing.BuildState(cfg, p.NodeSync.GetNodeID(), p.ServiceLabel.GetAgentLabel(), p.ContivConf.GetStaticDefaultGW(), podThis)
}

// podCIDRFromKube is, with external IPAM, this node's pod CIDRs from the
// Kubernetes state (an invalid Prefix: none of that family, use the
// config). An invalid value is logged and counted, and the pod subnets in
// use stay; with none in use the error is a *waitError.
func (p *Plugin) podCIDRFromKube(cfg *contivconf.IPAMConfig, ks api.KubeStateData) (addressing.PodCIDRs, error) {
	if !cfg.UseExternalIPAM {
		return addressing.PodCIDRs{}, nil
	}
	name := p.ServiceLabel.GetAgentLabel()
	pfx, found, err := addressing.ExternalPodCIDRs(cfg, name, ks)
	if found && err == nil {
		return pfx, nil
	}
	cur := p.st.Load()
	if !found {
		// No pod CIDR of this node yet (no node record, or one without
		// pod_CIDR): a subnet derived from the node ID could be another
		// node's, so IPAM waits; once it has one, it keeps it.
		if cur == nil {
			return addressing.PodCIDRs{}, &waitError{what: "this node's pod CIDR",
				cause: fmt.Errorf("useExternalIPAM: Kubernetes node %q has no pod_CIDR in the Kubernetes state (no node record yet, or its spec.podCIDR is empty)", name)}
		}
		return cur.PodSubnets(), nil
	}
	p.invalidValue("pod_CIDR", err, cur)
	if cur == nil {
		return addressing.PodCIDRs{}, &waitError{what: "a valid pod CIDR of this node", cause: err}
	}
	return cur.PodSubnets(), nil
}

// invalidValue logs and counts a value of the Kubernetes state that IPAM
// cannot use.
func (p *Plugin) invalidValue(what string, err error, cur *addressing.State) {
	p.metrics.invalid.WithLabelValues(what).Inc()
	if cur == nil {
		p.Log.Error("invalid value in the Kubernetes state; no good one yet", "value", what, "error", err)
		return
	}
	p.Log.Error("invalid value in the Kubernetes state ignored; the one in use stays", "value", what,
		"error", err, "in-use", cur.PodThis.String())
}

// waitFor makes IPAM unready with the reason (in /readiness).
func (p *Plugin) waitFor(w *waitError) {
	p.setWaiting(w)
	p.Log.Warn("ipam not initialised", "reason", w.Error())
}

// setWaiting records why IPAM is not initialised (nil: it is) and reports
// the readiness to the health plugin.
func (p *Plugin) setWaiting(w *waitError) {
	p.waiting.Store(w)
	p.reportReadiness()
}

// reportReadiness tells the health plugin whether IPAM can serve: not
// while it waits for a value it needs (Init), nor while the store does
// not take its writes (Error: a full disk, a failed store); OK otherwise.
func (p *Plugin) reportReadiness() {
	p.readyMu.Lock()
	defer p.readyMu.Unlock()
	switch w, storeErr := p.waiting.Load(), p.keeper.StoreFailing(); {
	case w != nil:
		p.report(health.Init, w)
	case storeErr != nil:
		p.report(health.Error, fmt.Errorf("%w: %w", ErrStoreFailing, storeErr))
	case p.st.Load() == nil:
		p.report(health.Init, keeper.ErrNotReady)
	default:
		p.report(health.OK, nil)
	}
}

// ErrStoreFailing: the local store does not take IPAM's writes (IPAM is
// not ready until one is durable again).
var ErrStoreFailing = errors.New("the pod allocations cannot be stored")

// report tells the health plugin, when there is one.
func (p *Plugin) report(s health.State, err error) {
	if p.StatusCheck != nil {
		p.StatusCheck.ReportStateChange(p.String(), s, err)
	}
}

// thisNodeIPs are the management addresses of this node in Kubernetes
// (a pod whose host address is one of them runs here).
func (p *Plugin) thisNodeIPs() map[netip.Addr]struct{} {
	out := map[netip.Addr]struct{}{}
	n := p.NodeSync.GetAllNodes()[p.ServiceLabel.GetAgentLabel()]
	if n == nil {
		return out
	}
	for _, ip := range n.MgmtIPAddresses {
		if a, ok := addressing.ToAddr(ip); ok {
			out[a] = struct{}{}
		}
	}
	return out
}

// Update pushes PodCIDRChange when the Kubernetes pod CIDR of this node
// differs from the pod subnet in use (compared by value: spec §2.16 bug
// 2 fixed), gives back the addresses of a pod deleted from Kubernetes,
// and serves the CNI events (see pod_events.go).
func (p *Plugin) Update(ev api.Event, txn api.UpdateOperations) (string, error) {
	switch e := ev.(type) {
	case *podmanager.AddPod:
		return p.addPod(e)
	case *podmanager.DeletePod:
		return p.deletePod(e)
	case *podmanager.GCPods:
		return p.gcPods(e)
	case *nodesync.NodeUpdate:
		return p.nodeUpdate(e, txn)
	case *api.KubeStateChange:
		return p.podChange(e)
	}
	return "", nil
}

// nodeUpdate pushes PodCIDRChange when one of this node's pod CIDRs (any
// family) moved to a valid subnet. An invalid one is logged, counted and
// recorded in the event history (the returned description), and the pod
// subnets in use stay.
func (p *Plugin) nodeUpdate(e *nodesync.NodeUpdate, txn api.UpdateOperations) (string, error) {
	if e.NewState == nil || len(e.NewState.PodCIDRs) == 0 && e.NewState.PodCIDR == nil {
		return "", nil
	}
	cur := p.st.Load()
	var current addressing.PodCIDRs
	if cur != nil {
		current = cur.PodSubnets()
	}
	next, err := p.nextPodCIDRs(e)
	if err != nil {
		err = fmt.Errorf("pod CIDRs %v of node %s: %w", e.NewState.PodCIDRs, e.NodeName, err)
		p.invalidValue("pod_CIDR", err, cur)
		return fmt.Sprintf("ignored: %v; the pod subnets in use (%s) stay", err, addressing.DescribeCIDRs(current)), nil
	}
	if next == current {
		return "", nil
	}
	ev := &PodCIDRChange{}
	for i, n := range next {
		if n.IsValid() && n != current[i] {
			ev.LocalPodCIDRs = append(ev.LocalPodCIDRs, addressing.ToIPNet(n))
		}
	}
	if len(ev.LocalPodCIDRs) == 0 {
		return "", nil // a family the node gets from the config still
	}
	ev.LocalPodCIDR = ev.LocalPodCIDRs[0]
	if err := txn.PushFollowUp(ev); err != nil {
		return "", fmt.Errorf("pushing PodCIDRChange to %s: %w", addressing.DescribeCIDRs(next), err)
	}
	p.Log.Info("sent PodCIDRChange", "from", addressing.DescribeCIDRs(current), "to", addressing.DescribeCIDRs(next))
	return fmt.Sprintf("pod CIDRs %s -> %s: PodCIDRChange sent", addressing.DescribeCIDRs(current), addressing.DescribeCIDRs(next)), nil
}

// nextPodCIDRs are the pod CIDRs a NodeUpdate gives, by slot; a family
// it does not give keeps the subnet in use.
func (p *Plugin) nextPodCIDRs(e *nodesync.NodeUpdate) (addressing.PodCIDRs, error) {
	list := e.NewState.PodCIDRs
	if len(list) == 0 {
		list = []*net.IPNet{e.NewState.PodCIDR}
	}
	var next addressing.PodCIDRs
	if cur := p.st.Load(); cur != nil {
		next = cur.PodSubnets()
	}
	for _, n := range list {
		pfx, ok := addressing.ToPrefix(n)
		if !ok {
			return addressing.PodCIDRs{}, fmt.Errorf("%v: not a subnet", n)
		}
		i, err := addressing.CheckPodCIDR(p.ContivConf.GetIPAMConfig(), pfx)
		if err != nil {
			return addressing.PodCIDRs{}, fmt.Errorf("%s: %w", pfx, err)
		}
		next[i] = pfx
	}
	return next, nil
}

// podChange tells the keeper about a pod of the Kubernetes state: a pod
// that is there stops its grace period; a deleted pod is the first look
// that misses it (its addresses are released a grace period later if a
// second look still misses it: see keeper/evidence.go).
func (p *Plugin) podChange(e *api.KubeStateChange) (string, error) {
	switch e.Resource {
	case poolblock.GrantKeyword:
		return p.grantChange(e)
	case mirror.Keyword:
		return p.mirrorChange(e)
	}
	if e.NewValue != nil {
		if pod, ok := e.NewValue.(*podmodel.Pod); ok {
			return "", p.keeper.Do(&keeper.Request{Kind: keeper.ReqPodSeen, Pod: podmodel.GetID(pod), UID: pod.GetUid(),
				NodeScoped: strings.HasPrefix(e.Key, podmodel.NodeKeyPrefix)}).Err
		}
		return "", nil
	}
	pod, ok := e.PrevValue.(*podmodel.Pod)
	if !ok {
		return "", nil
	}
	id := podmodel.GetID(pod)
	if err := p.keeper.Do(&keeper.Request{Kind: keeper.ReqPodGone, Pod: id, UID: pod.GetUid()}).Err; err != nil {
		return "", err
	}
	return fmt.Sprintf("pod %s deleted: its addresses, if any, are release candidates", id), nil
}

// mirrorChange hands contiv-ksr's mirror marker to the keeper; a value
// that is not a marker is reported and changes nothing.
func (p *Plugin) mirrorChange(e *api.KubeStateChange) (string, error) {
	v, ok := e.NewValue.(*structpb.Struct)
	if !ok {
		return "", nil // deleted: the last marker goes stale
	}
	m, err := keeper.MarkerFromStruct(v)
	if err != nil {
		p.invalidValue(mirror.Keyword, fmt.Errorf("%s: %w", e.Key, err), p.st.Load())
		return "", nil
	}
	return "", p.keeper.Do(&keeper.Request{Kind: keeper.ReqMirror, Mirror: m}).Err
}

// grantChange makes the node's pools follow its changed grant.
func (p *Plugin) grantChange(e *api.KubeStateChange) (string, error) {
	g := poolblock.Grant{Node: p.ServiceLabel.GetAgentLabel()} // deleted: no blocks (nodeipam freed them)
	if e.NewValue != nil {
		v, ok := e.NewValue.(*structpb.Struct)
		var parsed bool
		if ok {
			g, parsed = keeper.GrantFromStruct(v)
		}
		if !parsed {
			p.invalidValue("poolgrant", fmt.Errorf("pool grant %s: not a grant", e.Key), p.st.Load())
			return "", nil
		}
	}
	err := p.keeper.ApplyGrant(g)
	if errors.Is(err, keeper.ErrNotReady) {
		return "", nil // the first resync reads the grant
	}
	return fmt.Sprintf("pool grant: %v", g.Blocks), err
}

// Revert undoes an AddPod (a later handler failed): the attachment's
// address is released, after its store (the keeper orders requests of
// one pod). Other events change nothing that would need undoing.
func (p *Plugin) Revert(ev api.Event) error {
	if e, ok := ev.(*podmanager.AddPod); ok {
		return p.revertAddPod(e)
	}
	return nil
}

// Resource keywords of the Kubernetes state IPAM reads.
const (
	nodeResource = node.Keyword
	podResource  = podmodel.Keyword
)
