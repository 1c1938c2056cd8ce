package ipam

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// AllocationPrefix is the bolt key prefix of the pod allocations:
// AllocationPrefix + "<namespace>/<name>" -> the address.
const AllocationPrefix = "/contiv-agent/ipam/pods/"

// dbTimeout bounds one bolt operation.
const dbTimeout = 10 * time.Second

// AllocatePodIP implements API.
func (p *Plugin) AllocatePodIP(podID podmodel.ID, ipamType, ipamData string) (net.IP, error) {
	if err := checkPodID(podID); err != nil {
		return nil, err
	}
	p.mu.Lock()
	st := p.st
	if st == nil {
		p.mu.Unlock()
		return nil, errNotReady
	}
	var a netip.Addr
	var existed bool
	var err error
	if st.cfg.UseExternalIPAM {
		a, existed, err = st.recordExternal(podID, ipamData)
	} else {
		a, existed, err = st.pool.Assign(podID)
		if err != nil {
			err = fmt.Errorf("no IP address is free for allocation in the subnet %s: %w", st.podThis, err)
		}
	}
	p.mu.Unlock()
	if err != nil {
		p.metrics.failed.Inc()
		return nil, err
	}
	if existed {
		return toIP(a), nil
	}
	if err := p.persist(podID, a); err != nil {
		p.forget(st, podID)
		p.metrics.failed.Inc()
		return nil, fmt.Errorf("pod %s: address %s not stored, allocation undone: %w", podID, a, err)
	}
	p.Log.Debug("pod IP allocated", "pod", podID, "ip", a, "ipam-type", ipamType)
	return toIP(a), nil
}

// checkPodID refuses IDs that cannot be a Kubernetes pod's.
func checkPodID(id podmodel.ID) error {
	if id.Name == "" || id.Namespace == "" || strings.Contains(id.Name, "/") || strings.Contains(id.Namespace, "/") {
		return fmt.Errorf("pod ID %q: want a name and a namespace without '/'", id.String())
	}
	return nil
}

// cniIPConfig is the part of a CNI IPConfig IPAM reads from ipamData.
type cniIPConfig struct {
	Address string `json:"address"`
	Gateway string `json:"gateway,omitempty"`
}

// recordExternal records the address an external IPAM gave the pod. The
// same pod with the same address again is idempotent; with another address
// it replaces the old one.
func (st *state) recordExternal(podID podmodel.ID, ipamData string) (netip.Addr, bool, error) {
	var c cniIPConfig
	if err := json.Unmarshal([]byte(ipamData), &c); err != nil {
		return netip.Addr{}, false, fmt.Errorf("error by unmarshalling external IPAM result: ipamData %q: %w", ipamData, err)
	}
	pfx, err := netip.ParsePrefix(c.Address)
	if err != nil {
		return netip.Addr{}, false, fmt.Errorf("external IPAM result: address %q: want an address with a prefix length (10.1.1.5/24)", c.Address)
	}
	a := pfx.Addr()
	if old, ok := st.external[podID]; ok && old == a {
		return a, true, nil
	}
	for other, b := range st.external {
		if b == a && other != podID {
			return netip.Addr{}, false, fmt.Errorf("external IPAM result: address %s of pod %s is already held by pod %s", a, podID, other)
		}
	}
	st.external[podID] = a
	return a, false, nil
}

// forget undoes an allocation whose persisting failed, unless a resync
// replaced the state meanwhile.
func (p *Plugin) forget(st *state, podID podmodel.ID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.st != st {
		return
	}
	if st.cfg.UseExternalIPAM {
		delete(st.external, podID)
		return
	}
	st.pool.Unassign(podID)
}

// GetPodIP implements API.
func (p *Plugin) GetPodIP(podID podmodel.ID) (n *net.IPNet) {
	p.read(func(st *state) {
		if a, ok := st.lookup(podID); ok {
			n = &net.IPNet{IP: toIP(a), Mask: net.CIDRMask(a.BitLen(), a.BitLen())}
		}
	})
	return n
}

// lookup finds the pod's address in either mode.
func (st *state) lookup(podID podmodel.ID) (netip.Addr, bool) {
	if a, ok := st.external[podID]; ok {
		return a, true
	}
	return st.pool.Lookup(podID)
}

// GetPodFromIP implements API.
func (p *Plugin) GetPodFromIP(podIP net.IP) (id podmodel.ID, found bool) {
	a, ok := toAddr(podIP)
	if !ok {
		return id, false
	}
	p.read(func(st *state) {
		if id, found = st.pool.Owner(a); found {
			return
		}
		for pod, b := range st.external {
			if b == a {
				id, found = pod, true
				return
			}
		}
	})
	return id, found
}

// ReleasePodIP implements API.
func (p *Plugin) ReleasePodIP(podID podmodel.ID) error {
	p.mu.Lock()
	st := p.st
	var a netip.Addr
	var ok bool
	if st != nil {
		if a, ok = st.external[podID]; ok {
			delete(st.external, podID)
		} else {
			a, ok = st.pool.Unassign(podID)
		}
	}
	p.mu.Unlock()
	if !ok {
		p.Log.Debug("release of a pod without an IP", "pod", podID)
		return nil
	}
	if err := p.unpersist(podID); err != nil {
		return fmt.Errorf("pod %s: address %s released but its record stays: %w", podID, a, err)
	}
	p.Log.Debug("pod IP released", "pod", podID, "ip", a)
	return nil
}

// allocationKey is the bolt key of the pod's allocation.
func allocationKey(id podmodel.ID) string { return AllocationPrefix + id.Namespace + "/" + id.Name }

// persist stores the allocation durably (bolt commits before Put returns).
func (p *Plugin) persist(id podmodel.ID, a netip.Addr) error {
	if p.LocalDB == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), dbTimeout)
	defer cancel()
	return p.LocalDB.Put(ctx, allocationKey(id), []byte(a.String()))
}

// unpersist deletes the pod's allocation record.
func (p *Plugin) unpersist(id podmodel.ID) error {
	if p.LocalDB == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), dbTimeout)
	defer cancel()
	_, err := p.LocalDB.Delete(ctx, allocationKey(id))
	return err
}

// storedAllocations reads every allocation record; a record that does not
// parse is reported and left in place (no data is dropped silently).
func (p *Plugin) storedAllocations() (map[podmodel.ID]netip.Addr, error) {
	out := map[podmodel.ID]netip.Addr{}
	if p.LocalDB == nil {
		return out, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), dbTimeout)
	defer cancel()
	kvs, _, err := p.LocalDB.List(ctx, AllocationPrefix)
	if err != nil {
		return nil, fmt.Errorf("reading pod allocations under %s: %w", AllocationPrefix, err)
	}
	for _, kv := range kvs {
		id, a, err := parseAllocation(kv.Key, kv.Value)
		if err != nil {
			p.Log.Warn("skipping a pod allocation record", "error", err)
			continue
		}
		out[id] = a
	}
	return out, nil
}

// parseAllocation decodes one allocation record.
func parseAllocation(key string, value []byte) (podmodel.ID, netip.Addr, error) {
	rest, _ := strings.CutPrefix(key, AllocationPrefix)
	ns, name, ok := strings.Cut(rest, "/")
	id := podmodel.ID{Name: name, Namespace: ns}
	if !ok || checkPodID(id) != nil {
		return id, netip.Addr{}, fmt.Errorf("key %q: want %s<namespace>/<name>", key, AllocationPrefix)
	}
	a, err := netip.ParseAddr(string(value))
	if err != nil {
		return id, netip.Addr{}, fmt.Errorf("key %q: value %q: not an IP address", key, value)
	}
	return id, a, nil
}
