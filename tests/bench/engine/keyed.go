package engine

import (
	"math/rand/v2"
	"net/netip"
	"strings"

	"github.com/contiv-ipam/agent/engine/ipalloc"
)

// allocKey has the shape of plugins/ipam's allocKey: an attachment
// (network, container ID, interface name) and a pod (name, namespace),
// five strings, compared as a whole.
type allocKey struct {
	network, containerID, ifName string
	podName, podNamespace        string
}

// keySet holds the keys of a keyed pool, built before the pool so that
// neither their building nor their string bytes count in a benchmark.
// stored[i] is the key passed to Assign, which the pool keeps; request[i]
// is an equal key whose strings have bytes of their own, passed to
// Unassign the way a CNI DEL brings its own copy (Go compares two strings
// with the same pointer without reading their bytes).
//
// The container IDs are 64-hex windows of one random string, and the pod
// names (web-%08x) slices of another: distinct keys of realistic length
// at one byte each rather than eighty.
type keySet struct {
	stored, request []allocKey
}

func newKeySet(n int) *keySet {
	const hexDigits = "0123456789abcdef"
	rng := rand.New(rand.NewPCG(3, uint64(n)))
	var ids, names strings.Builder
	for range n + 63 {
		ids.WriteByte(hexDigits[rng.IntN(16)])
	}
	for i := range n {
		names.WriteString("web-")
		for shift := 28; shift >= 0; shift -= 4 {
			names.WriteByte(hexDigits[i>>shift&15])
		}
	}
	build := func(ids, names, ifName, ns string) []allocKey {
		keys := make([]allocKey, n)
		for i := range keys {
			keys[i] = allocKey{network: "", containerID: ids[i : i+64], ifName: ifName, podName: names[12*i : 12*i+12], podNamespace: ns}
		}
		return keys
	}
	return &keySet{
		stored:  build(ids.String(), names.String(), "eth0", "default"),
		request: build(strings.Clone(ids.String()), strings.Clone(names.String()), strings.Clone("eth0"), strings.Clone("default")),
	}
}

// spareKeys is how many keys a keyed engine has beyond its slots: a
// released key waits behind that many before it is assigned again, so an
// assigned key is always one that holds nothing.
const spareKeys = 1024

// keyedEngine is ipalloc.Keyed as the IPAM plugin uses it: Assign a key
// that holds nothing, Unassign it later (AssignAddr at setup). A slot holds
// a key's number in keys; free is a ring of the numbers of the keys that
// hold nothing, oldest first.
type keyedEngine struct {
	k           *ipalloc.Keyed[allocKey]
	keys        *keySet
	held        []int32
	free        []int32
	head, nfree int
}

func openKeyed(s shape, slots int) (engine, error) {
	k, err := ipalloc.NewKeyed[allocKey](contivConfig(s))
	if err != nil {
		return nil, err
	}
	e := &keyedEngine{k: k, keys: newKeySet(slots + spareKeys), held: make([]int32, slots)}
	e.free = make([]int32, len(e.keys.stored))
	for i := range e.free {
		e.free[i] = int32(i)
	}
	e.nfree = len(e.free)
	return e, nil
}

// fresh takes the key that has held nothing for longest.
func (e *keyedEngine) fresh() int32 {
	i := e.free[e.head]
	if e.head++; e.head == len(e.free) {
		e.head = 0
	}
	e.nfree--
	return i
}

func (e *keyedEngine) take(slot int, a netip.Addr) error {
	i := e.fresh()
	e.held[slot] = i
	return e.k.AssignAddr(e.keys.stored[i], a)
}

func (e *keyedEngine) allocate(slot int) (netip.Addr, error) {
	i := e.fresh()
	e.held[slot] = i
	a, existed, err := e.k.Assign(e.keys.stored[i])
	if existed {
		panic("engine: a fresh key already held an address") // a bug of this adapter
	}
	return a, err
}

func (e *keyedEngine) release(slot int) error {
	i := e.held[slot]
	if _, ok := e.k.Unassign(e.keys.request[i]); !ok {
		return errNotHeld
	}
	t := e.head + e.nfree
	if t >= len(e.free) {
		t -= len(e.free)
	}
	e.free[t] = i
	e.nfree++
	return nil
}

func buildKeyed(s shape, addrs []netip.Addr, keys *keySet) (any, error) {
	k, err := ipalloc.NewKeyed[allocKey](contivConfig(s))
	if err != nil {
		return nil, err
	}
	for i, a := range addrs {
		if err := k.AssignAddr(keys.stored[i], a); err != nil {
			return nil, err
		}
	}
	return k, nil
}
