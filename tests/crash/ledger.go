package crash

import (
	"fmt"
	"net/netip"
	"sort"

	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// outcome is what a client knows about one key after its last call.
type outcome int

const (
	// held: the last call that mattered was an acknowledged Add.
	held outcome = iota + 1
	// released: the last call was an acknowledged Delete, or an
	// acknowledged GC did not list the key.
	released
	// unknown: the last call failed or was cut by the kill; the key may
	// or may not hold an address.
	unknown
)

// entry is the ledger line of one key.
type entry struct {
	state outcome
	// addr: held, the acknowledged address; unknown, the only address
	// the key may still hold (the invalid Addr when it may hold any: an
	// Add with an unknown outcome).
	addr netip.Addr
	// pod is the pod the key was added for ("namespace/name").
	pod string
}

// Ledger is what one client knows about the keys it used. Owner: the
// client that records into it; the checker reads it only while the
// client is stopped.
type Ledger struct {
	keys map[podmanager.AttachmentKey]entry

	// Figures, counted as the calls return.
	AddsOK, DeletesOK, Unknowns, Collected int
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger {
	return &Ledger{keys: map[podmanager.AttachmentKey]entry{}}
}

// AddOK records an acknowledged Add of key for pod with addr.
func (l *Ledger) AddOK(key podmanager.AttachmentKey, pod string, addr netip.Addr) {
	l.keys[key] = entry{state: held, addr: addr, pod: pod}
	l.AddsOK++
}

// DeleteOK records an acknowledged Delete of key.
func (l *Ledger) DeleteOK(key podmanager.AttachmentKey) {
	e := l.keys[key]
	l.keys[key] = entry{state: released, pod: e.pod}
	l.DeletesOK++
}

// CollectedOK records that an acknowledged GC that did not list key
// released it.
func (l *Ledger) CollectedOK(key podmanager.AttachmentKey) {
	e := l.keys[key]
	l.keys[key] = entry{state: released, pod: e.pod}
	l.Collected++
}

// AddUnknown records an Add of key for pod whose outcome is unknown: the
// key may hold any address, or the one it held before.
func (l *Ledger) AddUnknown(key podmanager.AttachmentKey, pod string) {
	e, ok := l.keys[key]
	if !ok || e.state == released {
		e.addr = netip.Addr{}
	}
	l.keys[key] = entry{state: unknown, addr: e.addr, pod: pod}
	l.Unknowns++
}

// DeleteUnknown records a Delete of key whose outcome is unknown: the key
// holds what it held before, or nothing.
func (l *Ledger) DeleteUnknown(key podmanager.AttachmentKey) {
	e, ok := l.keys[key]
	if !ok {
		e = entry{}
	}
	e.state = unknown
	l.keys[key] = e
	l.Unknowns++
}

// Held returns the keys with an acknowledged Add not followed by an
// acknowledged Delete, sorted (Addr gives their addresses).
func (l *Ledger) Held() []podmanager.AttachmentKey { return l.keysIn(held) }

// Unknown returns the keys whose last call has an unknown outcome, sorted.
func (l *Ledger) Unknown() []podmanager.AttachmentKey { return l.keysIn(unknown) }

// Addr returns the acknowledged address of a held key.
func (l *Ledger) Addr(key podmanager.AttachmentKey) (netip.Addr, bool) {
	e, ok := l.keys[key]
	return e.addr, ok && e.state == held
}

// Pod returns the pod ("namespace/name") key was added for.
func (l *Ledger) Pod(key podmanager.AttachmentKey) string { return l.keys[key].pod }

func (l *Ledger) keysIn(s outcome) []podmanager.AttachmentKey {
	var out []podmanager.AttachmentKey
	for k, e := range l.keys {
		if e.state == s {
			out = append(out, k)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// Allocation is one allocation the agent reports (REST
// /contiv/v1/ipam/allocations): its key (empty for a pod-keyed
// allocation), its pod ("namespace/name") and its address.
type Allocation struct {
	Key  podmanager.AttachmentKey
	Pod  string
	Addr netip.Addr
}

// Check compares what the agent reports with the clients' ledgers (keys
// of distinct ledgers are distinct) and returns one line per violation,
// sorted:
//   - an address held by two allocations;
//   - a held key that holds no address, another address, or is reported
//     for another pod;
//   - a released key that holds an address;
//   - an unknown key that held an address before its last call and now
//     holds another one;
//   - an allocation of network whose key no ledger knows.
func Check(ledgers []*Ledger, network string, got []Allocation) []string {
	var v []string
	byKey := map[podmanager.AttachmentKey]Allocation{}
	byAddr := map[netip.Addr]Allocation{}
	for _, a := range got {
		if prev, dup := byAddr[a.Addr]; dup {
			v = append(v, fmt.Sprintf("address %s held twice: by %s (pod %s) and by %s (pod %s)",
				a.Addr, prev.Key, prev.Pod, a.Key, a.Pod))
		}
		byAddr[a.Addr] = a
		if a.Key.Network == network {
			byKey[a.Key] = a
		}
	}
	known := map[podmanager.AttachmentKey]bool{}
	for _, l := range ledgers {
		for k, e := range l.keys {
			known[k] = true
			if msg := checkKey(k, e, byKey); msg != "" {
				v = append(v, msg)
			}
		}
	}
	for k, a := range byKey {
		if !known[k] {
			v = append(v, fmt.Sprintf("key %s holds %s but no client ever added it", k, a.Addr))
		}
	}
	sort.Strings(v)
	return v
}

// checkKey returns the violation of one ledger line, "" when none.
func checkKey(k podmanager.AttachmentKey, e entry, byKey map[podmanager.AttachmentKey]Allocation) string {
	a, has := byKey[k]
	switch e.state {
	case held:
		switch {
		case !has:
			return fmt.Sprintf("key %s: Add acknowledged %s, now holds nothing", k, e.addr)
		case a.Addr != e.addr:
			return fmt.Sprintf("key %s: Add acknowledged %s, now holds %s", k, e.addr, a.Addr)
		case a.Pod != "" && a.Pod != e.pod:
			return fmt.Sprintf("key %s: added for pod %s, reported for pod %s", k, e.pod, a.Pod)
		}
	case released:
		if has {
			return fmt.Sprintf("key %s: released (Delete or GC acknowledged), still holds %s", k, a.Addr)
		}
	case unknown:
		if has && e.addr.IsValid() && a.Addr != e.addr {
			return fmt.Sprintf("key %s: held %s before a call with unknown outcome, now holds %s", k, e.addr, a.Addr)
		}
	}
	return ""
}
