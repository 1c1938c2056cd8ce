package checkpoint

import (
	"encoding/json"
	"fmt"
)

// entryFieldsV1 lists the keys of an entry of "contiv-ipam/1", for errors.
const entryFieldsV1 = `"network", "containerId", "ifName", "pod", "ip", "allocatedAt", "metadata"`

// v1Names names the fields of a "contiv-ipam/1" document: its one address
// is "ip".
func v1Names(field string) string {
	if field == "ips" || field == "ips[0]" {
		return "ip"
	}
	return field
}

// decodeV1 reads the members of a "contiv-ipam/1" document and migrates
// it: every entry keeps its key, time and metadata, and its "ip" becomes
// ips[0].
func decodeV1(top []member) (Data, error) {
	d := Data{Version: Version}
	var entries []json.RawMessage
	if err := readTop(top, &d, &entries); err != nil {
		return Data{}, err
	}
	d.Allocations = make([]Entry, len(entries))
	for i, raw := range entries {
		e, err := decodeEntryV1(raw)
		if err != nil {
			return Data{}, atEntry(i, err)
		}
		d.Allocations[i] = normalize(e)
	}
	if err := validate(d.Allocations, v1Names); err != nil {
		return Data{}, err
	}
	return d, nil
}

// decodeEntryV1 reads one entry of "contiv-ipam/1" in the current form.
func decodeEntryV1(raw []byte) (Entry, error) {
	ms, err := readObject(raw)
	if err != nil {
		return Entry{}, &entryError{msg: err.Error()}
	}
	var e Entry
	hasIP := false
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
		case "ip":
			var ip string
			ip, err = readString(m.raw)
			e.IPs, hasIP = []string{ip}, true
		case "allocatedAt":
			e.AllocatedAt, err = readTime(m.raw)
		case "metadata":
			e.Metadata, err = readStringMap(m.raw)
		default:
			return Entry{}, &entryError{msg: fmt.Sprintf("unknown field %s (an entry of %s has %s)", quote(m.key), VersionV1, entryFieldsV1)}
		}
		if err != nil {
			return Entry{}, &entryError{field: m.key, msg: err.Error()}
		}
	}
	switch {
	case !hasIP:
		return Entry{}, &entryError{field: "ip", msg: "missing: want the allocation's address"}
	case e.Pod == nil:
		return Entry{}, &entryError{field: "pod", msg: fmt.Sprintf("missing: every entry of %s names its pod", VersionV1)}
	}
	return e, nil
}
