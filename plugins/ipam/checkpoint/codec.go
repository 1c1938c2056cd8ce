package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
)

// ErrNewerVersion refuses a document written by a newer version of the
// format ("contiv-ipam/N", N > 2): this code cannot read it without losing
// what the newer version added. The error wrapping it names the version
// found and the newest this code reads.
var ErrNewerVersion = errors.New("checkpoint written by a newer version of the format")

// ErrInvalid is wrapped by every other refusal of Decode and Encode: not
// JSON, not a checkpoint version, an unknown field, a value of the wrong
// type, an entry the validation rules refuse. The error wrapping it names
// where (the entry index and the field) and the value.
var ErrInvalid = errors.New("invalid checkpoint")

// Encode writes d as the current version (d.Version is set to Version):
// indented JSON, a newline at the end, allocations sorted by their first
// address, every time in UTC, addresses and pools in canonical form. d is
// not modified. It refuses a d that Decode would refuse.
func Encode(d Data) ([]byte, error) {
	d.Version = Version
	d.TakenAt = d.TakenAt.UTC()
	entries := make([]Entry, len(d.Allocations))
	for i, e := range d.Allocations {
		entries[i] = normalize(e)
	}
	d.Allocations = entries
	if err := validate(d.Allocations, v2Names); err != nil {
		return nil, err
	}
	sortEntries(d.Allocations)
	out, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("%w: encoding: %w", ErrInvalid, err)
	}
	return append(out, '\n'), nil
}

// Decode reads a document of any version this code reads and returns it
// in the current form (Version set to Version; allocations in document
// order, never nil; times in UTC; addresses and pools canonical). It reads
// the version first: VersionV1 is migrated (see the package doc), Version
// is read as is, a newer "contiv-ipam/N" is refused with ErrNewerVersion,
// anything else with ErrInvalid naming the value. Then it reads the
// document strictly and validates every entry (doc.go lists the rules).
func Decode(b []byte) (Data, error) {
	top, err := readObject(b)
	if err != nil {
		return Data{}, invalid("the document: %s", err)
	}
	raw, ok := lookup(top, "version")
	if !ok {
		return Data{}, invalid("field \"version\": missing: want %q (or %q)", Version, VersionV1)
	}
	v, err := readString(raw)
	if err != nil {
		return Data{}, invalid("field \"version\": %s", err)
	}
	var d Data
	switch {
	case v == Version:
		d, err = decodeV2(top)
	case v == VersionV1:
		d, err = decodeV1(top)
	case isNewer(v):
		return Data{}, fmt.Errorf("%w: version %s; this code reads up to %q", ErrNewerVersion, quote(v), Version)
	default:
		return Data{}, invalid("field \"version\": %s is not a version of this format: want %q (or %q)", quote(v), Version, VersionV1)
	}
	if err != nil {
		return Data{}, err
	}
	return d, nil
}

// versionPrefix is the name of the format in a version stamp.
const versionPrefix = "contiv-ipam/"

// isNewer tells whether v is "contiv-ipam/N" with N a decimal number
// (no sign, no leading zero) above 2.
func isNewer(v string) bool {
	n, ok := strings.CutPrefix(v, versionPrefix)
	if !ok || n == "" || n[0] == '0' || strings.IndexFunc(n, func(c rune) bool { return c < '0' || c > '9' }) >= 0 {
		return false
	}
	return len(n) > 1 || n > "2"
}

// lookup is the value of key among ms.
func lookup(ms []member, key string) (json.RawMessage, bool) {
	for _, m := range ms {
		if m.key == key {
			return m.raw, true
		}
	}
	return nil, false
}

// decodeV2 reads the members of a "contiv-ipam/2" document.
func decodeV2(top []member) (Data, error) {
	d := Data{Version: Version}
	var entries []json.RawMessage
	if err := readTop(top, &d, &entries); err != nil {
		return Data{}, err
	}
	d.Allocations = make([]Entry, len(entries))
	for i, raw := range entries {
		e, err := decodeEntry(raw)
		if err != nil {
			return Data{}, atEntry(i, err)
		}
		d.Allocations[i] = normalize(e)
	}
	if err := validate(d.Allocations, v2Names); err != nil {
		return Data{}, err
	}
	return d, nil
}

// readTop reads the members of a document of either version into d; the
// allocations are left raw in entries.
func readTop(top []member, d *Data, entries *[]json.RawMessage) error {
	found := false
	for _, m := range top {
		var err error
		switch m.key {
		case "version": // read by Decode
		case "node":
			d.Node, err = readString(m.raw)
		case "takenAt":
			d.TakenAt, err = readTime(m.raw)
		case "allocations":
			*entries, err = readArray(m.raw)
			found = true
		default:
			return invalid("unknown field %s (a document has \"version\", \"node\", \"takenAt\", \"allocations\")", quote(m.key))
		}
		if err != nil {
			return invalid("field %q: %s", m.key, err)
		}
	}
	if !found {
		return invalid("field \"allocations\": missing: want an array (empty when the node holds nothing)")
	}
	return nil
}

// entryFields lists the keys of an entry of "contiv-ipam/2", for errors.
const entryFields = `"network", "containerId", "ifName", "pod", "owner", "seq", "ips", "pools", "allocatedAt", "reservation", "metadata"`

// decodeEntry reads one entry of "contiv-ipam/2"; its errors are
// *entryError without an index.
func decodeEntry(raw []byte) (Entry, error) {
	ms, err := readObject(raw)
	if err != nil {
		return Entry{}, &entryError{msg: err.Error()}
	}
	var e Entry
	for _, m := range ms {
		var err error
		switch m.key {
		case "network":
			e.Network, err = readString(m.raw)
		case "containerId":
			e.ContainerID, err = readString(m.raw)
		case "ifName":
			e.IfName, err = readString(m.raw)
		case "pod":
			e.Pod, err = readPod(m.raw)
		case "owner":
			e.Owner, err = readString(m.raw)
		case "seq":
			e.Seq, err = readUint(m.raw)
		case "ips":
			e.IPs, err = readStrings(m.raw)
		case "pools":
			e.Pools, err = readStrings(m.raw)
		case "allocatedAt":
			e.AllocatedAt, err = readTime(m.raw)
		case "reservation":
			e.Reservation, err = readReservation(m.raw)
		case "metadata":
			e.Metadata, err = readStringMap(m.raw)
		default:
			return Entry{}, &entryError{msg: fmt.Sprintf("unknown field %s (an entry has %s)", quote(m.key), entryFields)}
		}
		if err != nil {
			return Entry{}, &entryError{field: m.key, msg: err.Error()}
		}
	}
	return e, nil
}

// readPod reads {"name", "namespace"}, both required.
func readPod(raw []byte) (*Pod, error) {
	ms, err := readObject(raw)
	if err != nil {
		return nil, err
	}
	var p Pod
	seen := 0
	for _, m := range ms {
		var err error
		switch m.key {
		case "name":
			p.Name, err = readString(m.raw)
		case "namespace":
			p.Namespace, err = readString(m.raw)
		default:
			return nil, fmt.Errorf("unknown field %s (a pod has \"name\", \"namespace\")", quote(m.key))
		}
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", m.key, err)
		}
		seen++
	}
	if seen != 2 {
		return nil, errors.New("want both \"name\" and \"namespace\"")
	}
	return &p, nil
}

// readReservation reads {"id", "deadline"}, both required.
func readReservation(raw []byte) (*Reservation, error) {
	ms, err := readObject(raw)
	if err != nil {
		return nil, err
	}
	var r Reservation
	seen := 0
	for _, m := range ms {
		var err error
		switch m.key {
		case "id":
			r.ID, err = readString(m.raw)
		case "deadline":
			r.Deadline, err = readTime(m.raw)
		default:
			return nil, fmt.Errorf("unknown field %s (a reservation has \"id\", \"deadline\")", quote(m.key))
		}
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", m.key, err)
		}
		seen++
	}
	if seen != 2 {
		return nil, errors.New("want both \"id\" and \"deadline\"")
	}
	return &r, nil
}

// readStrings reads an array of strings.
func readStrings(raw []byte) ([]string, error) {
	elems, err := readArray(raw)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(elems))
	for i, el := range elems {
		if out[i], err = readString(el); err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
	}
	return out, nil
}

// normalize returns e with its times in UTC and its addresses and pools
// in canonical form (the values that do not parse are left for validate
// to refuse); e's slices are not modified.
func normalize(e Entry) Entry {
	e.AllocatedAt = e.AllocatedAt.UTC()
	if e.Reservation != nil {
		r := *e.Reservation
		r.Deadline = r.Deadline.UTC()
		e.Reservation = &r
	}
	if e.Pod != nil {
		p := *e.Pod
		e.Pod = &p
	}
	if e.IPs != nil {
		ips := make([]string, len(e.IPs))
		for i, s := range e.IPs {
			ips[i] = s
			if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" && !a.Is4In6() {
				ips[i] = a.String()
			}
		}
		e.IPs = ips
	}
	if len(e.Pools) == 0 {
		e.Pools = nil // "pools": [] is none
	} else {
		pools := make([]string, len(e.Pools))
		for i, s := range e.Pools {
			pools[i] = s
			if p, err := netip.ParsePrefix(s); err == nil && p == p.Masked() && !p.Addr().Is4In6() {
				pools[i] = p.String()
			}
		}
		e.Pools = pools
	}
	if len(e.Metadata) == 0 {
		e.Metadata = nil
	} else {
		e.Metadata = maps.Clone(e.Metadata)
	}
	return e
}

// sortEntries sorts validated entries by their first address (unique).
func sortEntries(es []Entry) {
	slices.SortFunc(es, func(a, b Entry) int {
		return netip.MustParseAddr(a.IPs[0]).Compare(netip.MustParseAddr(b.IPs[0]))
	})
}
