package checkpoint

import (
	"fmt"
	"net/netip"
)

// entryError is an entry refused by Decode or Encode: its index in
// allocations, the field at fault ("" for the entry as a whole) and why
// (the message quotes the value).
type entryError struct {
	index int
	field string
	msg   string
}

func (e *entryError) Error() string {
	if e.field == "" {
		return fmt.Sprintf("%s: allocations[%d]: %s", ErrInvalid, e.index, e.msg)
	}
	return fmt.Sprintf("%s: allocations[%d]: field %q: %s", ErrInvalid, e.index, e.field, e.msg)
}

func (e *entryError) Unwrap() error { return ErrInvalid }

// invalid is a refusal of the document as a whole.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// atEntry sets the index of an *entryError.
func atEntry(i int, err error) error {
	if e, ok := err.(*entryError); ok {
		e.index = i
		return e
	}
	return &entryError{index: i, msg: err.Error()}
}

// names maps the name of a field of the current form ("ips[0]") to its
// name in the document read, for errors.
type names func(field string) string

// v2Names names the fields of a "contiv-ipam/2" document.
func v2Names(field string) string { return field }

// validate checks every entry (doc.go lists the rules) and, across them,
// that no key and no address is in two entries. Entries are normalized.
func validate(es []Entry, name names) error {
	keys := map[entryKey]int{}
	addrs := map[netip.Addr]int{}
	for i := range es {
		e := &es[i]
		fail := func(field, format string, args ...any) error {
			if field != "" {
				field = name(field)
			}
			return &entryError{index: i, field: field, msg: fmt.Sprintf(format, args...)}
		}
		key, err := checkKey(e, fail)
		if err != nil {
			return err
		}
		if j, dup := keys[key]; dup {
			return fail("", "the key %s is also allocations[%d]'s", key, j)
		}
		keys[key] = i
		as, err := checkAddrs(e, fail)
		if err != nil {
			return err
		}
		for k, a := range as {
			if j, dup := addrs[a]; dup {
				return fail(fmt.Sprintf("ips[%d]", k), "%s is also an address of allocations[%d]", quote(e.IPs[k]), j)
			}
			addrs[a] = i
		}
		if r := e.Reservation; r != nil {
			switch {
			case r.ID == "":
				return fail("reservation", "\"id\" is empty: want the reservation's ID")
			case r.Deadline.IsZero():
				return fail("reservation", "\"deadline\" is zero: want when the reservation expires")
			}
		}
	}
	return nil
}

// entryKey is the key of an entry, one kind set.
type entryKey struct {
	kind                         keyKind
	network, containerID, ifName string // attachment
	name, namespace              string // pod
	owner                        string // owner
	seq                          uint64
}

// keyKind is the kind of an entry's key.
type keyKind uint8

const (
	attachmentKey keyKind = iota + 1
	podKey
	ownerKey
)

func (k entryKey) String() string {
	switch k.kind {
	case attachmentKey:
		return fmt.Sprintf("network %s containerId %s ifName %s", quote(k.network), quote(k.containerID), quote(k.ifName))
	case podKey:
		return fmt.Sprintf("pod %s", quote(k.namespace+"/"+k.name))
	}
	return fmt.Sprintf("owner %s seq %d", quote(k.owner), k.seq)
}

// checkKey checks that e has exactly one kind of key, complete, and
// returns it.
func checkKey(e *Entry, fail func(field, format string, args ...any) error) (entryKey, error) {
	att := e.Network != "" || e.ContainerID != "" || e.IfName != ""
	own := e.Owner != "" || e.Seq != 0
	if e.Pod != nil {
		switch {
		case e.Pod.Name == "":
			return entryKey{}, fail("pod", "\"name\" is empty: want the pod's name")
		case e.Pod.Namespace == "":
			return entryKey{}, fail("pod", "\"namespace\" is empty: want the pod's namespace")
		}
	}
	switch {
	case own && (att || e.Pod != nil):
		field := "pod"
		for _, f := range []struct{ name, v string }{{"network", e.Network}, {"containerId", e.ContainerID}, {"ifName", e.IfName}} {
			if f.v != "" {
				field = f.name
				break
			}
		}
		return entryKey{}, fail(field, "given with \"owner\"/\"seq\": an owner's allocation has no pod and no attachment")
	case own:
		switch {
		case e.Owner == "":
			return entryKey{}, fail("owner", "missing: an owner's allocation (\"seq\" %d) names its owner", e.Seq)
		case e.Seq == 0:
			return entryKey{}, fail("seq", "missing or 0: an owner's allocation has a sequence number above 0")
		}
		return entryKey{kind: ownerKey, owner: e.Owner, seq: e.Seq}, nil
	case att:
		for _, f := range []struct{ name, v string }{{"network", e.Network}, {"containerId", e.ContainerID}, {"ifName", e.IfName}} {
			if f.v == "" {
				return entryKey{}, fail(f.name, "missing: an attachment has \"network\", \"containerId\", \"ifName\" and \"pod\"")
			}
		}
		if e.Pod == nil {
			return entryKey{}, fail("pod", "missing: an attachment has \"network\", \"containerId\", \"ifName\" and \"pod\"")
		}
		return entryKey{kind: attachmentKey, network: e.Network, containerID: e.ContainerID, ifName: e.IfName}, nil
	case e.Pod != nil:
		return entryKey{kind: podKey, name: e.Pod.Name, namespace: e.Pod.Namespace}, nil
	}
	return entryKey{}, fail("", "no key: want \"network\", \"containerId\", \"ifName\" with \"pod\" (an attachment), \"pod\" alone, or \"owner\" with \"seq\"")
}

// checkAddrs checks e's addresses and pools and returns the addresses.
func checkAddrs(e *Entry, fail func(field, format string, args ...any) error) ([]netip.Addr, error) {
	if n := len(e.IPs); n == 0 || n > 2 {
		return nil, fail("ips", "%d addresses: want 1, or 2 of different families", n)
	}
	as := make([]netip.Addr, len(e.IPs))
	for k, s := range e.IPs {
		field := fmt.Sprintf("ips[%d]", k)
		a, err := netip.ParseAddr(s)
		switch {
		case err != nil:
			return nil, fail(field, "%s is not an IP address", quote(s))
		case a.Zone() != "":
			return nil, fail(field, "%s has a zone: want an address without one", quote(s))
		case a.Is4In6():
			return nil, fail(field, "%s is an IPv4-mapped IPv6 address: write it %s", quote(s), a.Unmap())
		}
		as[k] = a
	}
	if len(as) == 2 && as[0].Is4() == as[1].Is4() {
		return nil, fail("ips[1]", "%s is of the same family as %s: want one address per family", quote(e.IPs[1]), quote(e.IPs[0]))
	}
	if len(e.Pools) != 0 && len(e.Pools) != len(e.IPs) {
		return nil, fail("pools", "%d pools for %d addresses: want none, or one per address in the order of \"ips\"", len(e.Pools), len(e.IPs))
	}
	for k, s := range e.Pools {
		field := fmt.Sprintf("pools[%d]", k)
		p, err := netip.ParsePrefix(s)
		switch {
		case err != nil:
			return nil, fail(field, "%s is not a prefix such as \"10.1.1.0/24\"", quote(s))
		case p.Addr().Is4In6():
			return nil, fail(field, "%s is an IPv4-mapped IPv6 prefix: want an IPv4 one", quote(s))
		case p != p.Masked():
			return nil, fail(field, "%s has host bits set: want %s", quote(s), p.Masked())
		case !p.Contains(as[k]):
			return nil, fail(field, "%s does not contain its address %s", quote(s), quote(e.IPs[k]))
		}
	}
	return as, nil
}
