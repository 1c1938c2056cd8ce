package nodesync

import (
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ksr/model/node"
	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
)

// buildNodes builds the registry from the vppnode and node resources of a
// kube state. Invalid keys, values of another type and unparsable
// addresses are logged and skipped. A name with several vppnode records
// keeps the smallest ID.
func (p *Plugin) buildNodes(ks api.KubeStateData) Nodes {
	nodes := Nodes{}
	vpp := ks[vppNodeResource]
	for _, key := range sortedKeys(vpp) {
		id, rec, ok := p.vppRecord(key, vpp[key])
		if !ok {
			continue
		}
		n := nodes[rec.GetName()]
		switch {
		case n == nil:
			n = &Node{Name: rec.GetName()}
			nodes[n.Name] = n
		case n.ID != 0:
			p.Log.Warn("several node ID records name one node; keeping the smallest ID",
				"node", n.Name, "ids", []uint32{n.ID, id})
			if n.ID < id {
				continue
			}
		}
		n.ID = id
		n.VppIPAddresses = p.parseVppAddresses(rec)
	}
	k8s := ks[nodeResource]
	for _, key := range sortedKeys(k8s) {
		name, kn, ok := p.k8sNode(key, k8s[key])
		if !ok {
			continue
		}
		n := nodes[name]
		if n == nil {
			n = &Node{Name: name}
			nodes[name] = n
		}
		n.MgmtIPAddresses = p.mgmtAddresses(kn)
		n.PodCIDR, n.PodCIDRs = p.podCIDRs(kn)
	}
	return nodes
}

func sortedKeys[M ~map[string]V, V any](m M) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// vppRecord checks one vppnode key and value; ok is false (and a warning
// logged) for an invalid key, a value of another type or without a name.
func (p *Plugin) vppRecord(key string, v any) (id uint32, rec *vppnode.VppNode, ok bool) {
	id, err := vppnode.ParseKey(key)
	if err != nil {
		p.Log.Warn("skipping an invalid vppnode key", "key", key, "err", err)
		return 0, nil, false
	}
	rec, isRec := v.(*vppnode.VppNode)
	switch {
	case !isRec || rec == nil:
		p.Log.Warn("skipping a vppnode value of an unexpected type", "key", key, "type", typeName(v))
		return 0, nil, false
	case rec.GetName() == "":
		p.Log.Warn("skipping a vppnode record without a node name", "key", key)
		return 0, nil, false
	case rec.GetId() != 0 && rec.GetId() != id:
		p.Log.Warn("vppnode record holds another ID than its key; the key wins", "key", key, "value-id", rec.GetId())
	}
	return id, rec, true
}

// k8sNode checks one node key and value; the name is the key's.
func (p *Plugin) k8sNode(key string, v any) (name string, n *node.Node, ok bool) {
	name, err := node.ParseKey(key)
	if err != nil {
		p.Log.Warn("skipping an invalid node key", "key", key, "err", err)
		return "", nil, false
	}
	n, isNode := v.(*node.Node)
	if !isNode || n == nil {
		p.Log.Warn("skipping a node value of an unexpected type", "key", key, "type", typeName(v))
		return "", nil, false
	}
	if n.GetName() != "" && n.GetName() != name {
		p.Log.Warn("node value names another node than its key; the key wins", "key", key, "value-name", n.GetName())
	}
	return name, n, true
}

func typeName(v any) string { return fmt.Sprintf("%T", v) }

// parseVppAddresses parses ip_addresses ("ip/prefix") and the obsolete
// ip_address ("ip/prefix" or a bare IP), skipping duplicates and logging
// what does not parse.
func (p *Plugin) parseVppAddresses(rec *vppnode.VppNode) []*IPWithNetwork {
	var out []*IPWithNetwork
	add := func(s string) {
		a, err := parseIPWithNetwork(s)
		if err != nil {
			p.Log.Warn("skipping an unparsable VPP address", "node", rec.GetName(), "address", s, "err", err)
			return
		}
		if !containsAddress(out, a) {
			out = append(out, a)
		}
	}
	for _, s := range rec.GetIpAddresses() {
		add(s)
	}
	if s := rec.GetIpAddress(); s != "" {
		add(s)
	}
	return out
}

// mgmtAddresses returns the InternalIP and ExternalIP addresses of n.
func (p *Plugin) mgmtAddresses(n *node.Node) []net.IP {
	var out []net.IP
	for _, a := range n.GetAddresses() {
		t := a.GetType()
		if t != node.NodeAddress_NodeInternalIP && t != node.NodeAddress_NodeExternalIP {
			continue
		}
		ip := normalizeIP(net.ParseIP(strings.TrimSpace(a.GetAddress())))
		if ip == nil {
			p.Log.Warn("skipping an unparsable node address", "node", n.GetName(), "type", t.String(), "address", a.GetAddress())
			continue
		}
		if !slices.ContainsFunc(out, ip.Equal) {
			out = append(out, ip)
		}
	}
	return out
}

// podCIDRs parses pod_CIDR and pod_CIDRs (see Node.PodCIDR and
// Node.PodCIDRs): first is pod_CIDR, else the first of all when pod_CIDR is
// unset; all is every CIDR of pod_CIDRs that parses, in order, else
// [first]. What does not parse is logged and left out; a pod_CIDR that is
// not the first of pod_CIDRs (Kubernetes never writes that) is logged and
// kept.
func (p *Plugin) podCIDRs(n *node.Node) (first *net.IPNet, all []*net.IPNet) {
	if s := n.GetPod_CIDR(); s != "" {
		first = p.parsePodCIDR(n.GetName(), "pod_CIDR", s)
	}
	for i, s := range n.GetPod_CIDRs() {
		if c := p.parsePodCIDR(n.GetName(), fmt.Sprintf("pod_CIDRs[%d]", i), s); c != nil {
			all = append(all, c)
		}
	}
	switch {
	case len(n.GetPod_CIDRs()) == 0:
		if first != nil {
			all = []*net.IPNet{copyNet(first)}
		}
	case n.GetPod_CIDR() == "":
		if len(all) > 0 {
			first = copyNet(all[0])
		}
	case first != nil && (len(all) == 0 || !sameNet(first, all[0])):
		p.Log.Warn("the node's pod_CIDR is not the first of its pod_CIDRs; keeping both as given",
			"node", n.GetName(), "pod-cidr", first.String(), "pod-cidrs", describeNets(all))
	}
	return first, all
}

// parsePodCIDR parses one pod CIDR of node (field names it in the log);
// nil when unparsable (logged).
func (p *Plugin) parsePodCIDR(node, field, s string) *net.IPNet {
	_, cidr, err := net.ParseCIDR(strings.TrimSpace(s))
	if err != nil {
		p.Log.Warn("ignoring an unparsable pod CIDR", "node", node, "field", field, "pod-cidr", s, "err", err)
		return nil
	}
	cidr.IP = normalizeIP(cidr.IP)
	return cidr
}
