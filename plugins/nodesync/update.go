package nodesync

import (
	"fmt"
	"strings"

	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ksr/model/node"
	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
)

// applyVppNodeChange applies a put or delete of another node's vppnode
// record: the node holding the key's ID leaves when the record is deleted
// or now names another node; the named node joins or changes its VPP
// addresses.
func (p *Plugin) applyVppNodeChange(ksc *api.KubeStateChange) ([]*NodeUpdate, string) {
	id, err := vppnode.ParseKey(ksc.Key)
	if err != nil {
		p.Log.Warn("ignoring a change of an invalid vppnode key", "key", ksc.Key, "err", err)
		return nil, ""
	}
	var rec *vppnode.VppNode
	if ksc.NewValue != nil {
		var ok bool
		if id, rec, ok = p.vppRecord(ksc.Key, ksc.NewValue); !ok {
			return nil, ""
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var ups []*NodeUpdate
	var desc []string
	if holder := p.nodeWithID(id); holder != nil && (rec == nil || holder.Name != rec.GetName()) {
		prev := copyNode(holder)
		holder.ID, holder.VppIPAddresses = 0, nil
		ups = append(ups, &NodeUpdate{NodeName: holder.Name, PrevState: prev})
		desc = append(desc, fmt.Sprintf("node %s left (ID %d)", holder.Name, id))
	}
	if rec != nil {
		if up, d := p.applyVppRecord(id, rec); up != nil {
			ups = append(ups, up)
			desc = append(desc, d)
		}
	}
	return ups, strings.Join(desc, "; ")
}

// applyVppRecord records that node rec.Name holds id with rec's addresses.
// Called with p.mu held.
func (p *Plugin) applyVppRecord(id uint32, rec *vppnode.VppNode) (*NodeUpdate, string) {
	name := rec.GetName()
	addrs := p.parseVppAddresses(rec)
	n := p.nodes[name]
	if n == nil {
		n = &Node{Name: name}
		p.nodes[name] = n
	}
	switch {
	case n.ID == id && sameVppAddresses(n.VppIPAddresses, addrs):
		return nil, ""
	case n.ID != 0 && n.ID < id:
		p.Log.Warn("another node ID record names this node; keeping the smallest ID",
			"node", name, "ids", []uint32{n.ID, id})
		return nil, ""
	}
	var prev *Node // a node without an ID was not known to have joined
	if n.ID != 0 {
		prev = copyNode(n)
	}
	n.ID, n.VppIPAddresses = id, addrs
	up := &NodeUpdate{NodeName: name, PrevState: prev, NewState: copyNode(n)}
	if prev == nil {
		return up, fmt.Sprintf("node %s joined (ID %d, VPP IPs %s)", name, id, describeVpp(addrs))
	}
	if prev.ID != id {
		return up, fmt.Sprintf("node %s moved from ID %d to %d", name, prev.ID, id)
	}
	return up, fmt.Sprintf("node %s VPP IPs %s -> %s", name, describeVpp(prev.VppIPAddresses), describeVpp(addrs))
}

// nodeWithID returns the node holding id, nil if none. Called with p.mu held.
func (p *Plugin) nodeWithID(id uint32) *Node {
	for _, n := range p.nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// applyNodeChange applies a put or delete of a Kubernetes node: a change
// of its management addresses or pod CIDR yields a NodeUpdate when the
// node has an ID (this node included).
func (p *Plugin) applyNodeChange(ksc *api.KubeStateChange) ([]*NodeUpdate, string) {
	var name string
	var upd Node // the new management addresses and pod CIDRs
	if ksc.NewValue == nil {
		var err error
		if name, err = node.ParseKey(ksc.Key); err != nil {
			p.Log.Warn("ignoring a deletion of an invalid node key", "key", ksc.Key, "err", err)
			return nil, ""
		}
	} else {
		keyName, kn, ok := p.k8sNode(ksc.Key, ksc.NewValue)
		if !ok {
			return nil, ""
		}
		name = keyName
		upd.MgmtIPAddresses = p.mgmtAddresses(kn)
		upd.PodCIDR, upd.PodCIDRs = p.podCIDRs(kn)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.nodes[name]
	if n == nil {
		if ksc.NewValue == nil {
			return nil, ""
		}
		n = &Node{Name: name}
		p.nodes[name] = n
	}
	if sameIPs(n.MgmtIPAddresses, upd.MgmtIPAddresses) && samePodCIDRs(n, &upd) {
		return nil, ""
	}
	prev := copyNode(n)
	n.MgmtIPAddresses, n.PodCIDR, n.PodCIDRs = upd.MgmtIPAddresses, upd.PodCIDR, upd.PodCIDRs
	if n.ID == 0 && ksc.NewValue == nil && name != p.name {
		delete(p.nodes, name) // known from nothing else
	}
	var what []string
	if !sameIPs(prev.MgmtIPAddresses, n.MgmtIPAddresses) {
		what = append(what, fmt.Sprintf("management IPs %s -> %s", describeIPs(prev.MgmtIPAddresses), describeIPs(n.MgmtIPAddresses)))
	}
	if !sameNet(prev.PodCIDR, n.PodCIDR) {
		what = append(what, fmt.Sprintf("pod CIDR %s -> %s", describeNet(prev.PodCIDR), describeNet(n.PodCIDR)))
	}
	// A list that is just the pod CIDR, before and after, said it already.
	if !sameNets(prev.PodCIDRs, n.PodCIDRs) && !(onlyPodCIDR(prev) && onlyPodCIDR(n)) {
		what = append(what, fmt.Sprintf("pod CIDRs %s -> %s", describeNets(prev.PodCIDRs), describeNets(n.PodCIDRs)))
	}
	desc := fmt.Sprintf("node %s %s", name, strings.Join(what, ", "))
	if n.ID == 0 {
		return nil, desc + " (no node ID yet: no NodeUpdate)"
	}
	return []*NodeUpdate{{NodeName: name, PrevState: prev, NewState: copyNode(n)}}, desc
}
