package checkpoint

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"time"
)

// AWSVersion is the version stamp of the IPAM checkpoint the AWS VPC CNI
// (ipamd) writes, /var/run/aws-node/ipam.json on a node: its only
// version so far.
const AWSVersion = "vpc-cni-ipam/1"

// AWSImportedFrom is the metadata key DecodeAWS sets on every entry, with
// AWSVersion as its value, so that an operator can tell imported
// allocations apart.
const AWSImportedFrom = "importedFrom"

// The AWS document, as its datastore writes it:
//
//	{"version": "vpc-cni-ipam/1",
//	 "allocations": [
//	   {"networkName": "aws-cni", "containerID": "4a1f...", "ifName": "eth0",
//	    "ipv4": "192.168.10.21", "allocationTimestamp": 1764370000123456789,
//	    "metadata": {"k8sPodNamespace": "default", "k8sPodName": "web-0", "interfacesCount": 1}}]}
//
// An entry is one CNI attachment (the CNI key: network, container,
// interface) with one address, "ipv4" or "ipv6" (the other omitted);
// "allocationTimestamp" is in nanoseconds since 1970 (0: unknown);
// "metadata" names the pod ("interfacesCount", the pod's interfaces, and
// either name may be missing in files of older versions).
const awsEntryFields = `"networkName", "containerID", "ifName", "ipv4", "ipv6", "allocationTimestamp", "metadata"`

// DecodeAWS reads an AWS VPC CNI IPAM checkpoint and converts it to a
// checkpoint of this format, taken at takenAt (the file's modification
// time, say), without a node name (the AWS file has none). Each AWS entry
// becomes an attachment: "network" from "networkName", "containerId" from
// "containerID", "ifName", "pod" from the metadata's "k8sPodName" and
// "k8sPodNamespace", "ips" from "ipv4" and "ipv6" (in that order),
// "allocatedAt" from "allocationTimestamp", and metadata
// {AWSImportedFrom: AWSVersion}.
//
// It reads as strictly as Decode: one JSON object, "version" exactly
// AWSVersion (anything else, a "contiv-ipam/N" document included, is
// ErrInvalid naming the value), every key known and of its type, each
// once. An entry is refused, naming allocations[i], the AWS field and
// its value, when a key field is missing or empty, when it has no
// address, when "ipv4" is not an IPv4 address or "ipv6" not an IPv6 one,
// when the timestamp is negative or does not fit, when the metadata lacks
// the pod's name or namespace (the attachments of this format are kept
// with their pod), and when its key or an address is another entry's.
// Every refusal wraps ErrInvalid.
func DecodeAWS(doc []byte, takenAt time.Time) (Data, error) {
	top, err := readObject(doc)
	if err != nil {
		return Data{}, invalid("the AWS VPC CNI checkpoint: %s", err)
	}
	var entries []json.RawMessage
	found := false
	for _, m := range top {
		switch m.key {
		case "version":
			v, err := readString(m.raw)
			if err != nil {
				return Data{}, invalid("field \"version\": %s", err)
			}
			if v != AWSVersion {
				return Data{}, invalid("field \"version\": %s is not the version of an AWS VPC CNI checkpoint: want %q", quote(v), AWSVersion)
			}
			found = true
		case "allocations":
			if entries, err = readArray(m.raw); err != nil {
				return Data{}, invalid("field \"allocations\": %s", err)
			}
		default:
			return Data{}, invalid("unknown field %s (an AWS VPC CNI checkpoint has \"version\", \"allocations\")", quote(m.key))
		}
	}
	switch {
	case !found:
		return Data{}, invalid("field \"version\": missing: want %q", AWSVersion)
	case entries == nil && lookupMissing(top, "allocations"):
		return Data{}, invalid("field \"allocations\": missing: want an array (empty when the node holds nothing)")
	}
	d := Data{Version: Version, TakenAt: takenAt.UTC(), Allocations: make([]Entry, 0, len(entries))}
	keys := map[[3]string]int{}
	addrs := map[netip.Addr]int{}
	for i, raw := range entries {
		e, as, err := decodeAWSEntry(raw)
		if err != nil {
			return Data{}, atEntry(i, err)
		}
		key := [3]string{e.Network, e.ContainerID, e.IfName}
		if j, dup := keys[key]; dup {
			return Data{}, &entryError{index: i, msg: fmt.Sprintf("networkName %s containerID %s ifName %s is also allocations[%d]'s",
				quote(e.Network), quote(e.ContainerID), quote(e.IfName), j)}
		}
		keys[key] = i
		for k, a := range as {
			if j, dup := addrs[a]; dup {
				return Data{}, &entryError{index: i, field: awsAddrField(a), msg: fmt.Sprintf("%s is also the address of allocations[%d]", quote(e.IPs[k]), j)}
			}
			addrs[a] = i
		}
		d.Allocations = append(d.Allocations, normalize(e))
	}
	if err := validate(d.Allocations, awsNames); err != nil {
		return Data{}, err // checked above: not expected
	}
	return d, nil
}

// lookupMissing tells whether key is not among ms.
func lookupMissing(ms []member, key string) bool {
	_, ok := lookup(ms, key)
	return !ok
}

// awsAddrField is the AWS field of address a.
func awsAddrField(a netip.Addr) string {
	if a.Is4() {
		return "ipv4"
	}
	return "ipv6"
}

// awsNames names the fields of this format as the AWS entry calls them.
func awsNames(field string) string {
	switch field {
	case "network":
		return "networkName"
	case "containerId":
		return "containerID"
	case "pod":
		return "metadata"
	case "ips", "ips[0]", "ips[1]":
		return "ipv4/ipv6"
	}
	return field
}

// decodeAWSEntry reads one AWS entry and converts it; its errors are
// *entryError without an index, naming the AWS field.
func decodeAWSEntry(raw []byte) (Entry, []netip.Addr, error) {
	ms, err := readObject(raw)
	if err != nil {
		return Entry{}, nil, &entryError{msg: err.Error()}
	}
	var e Entry
	var v4, v6, podName, podNamespace string
	hasMeta := false
	var ts int64
	for _, m := range ms {
		var err error
		switch m.key {
		case "networkName":
			e.Network, err = readString(m.raw)
		case "containerID":
			e.ContainerID, err = readString(m.raw)
		case "ifName":
			e.IfName, err = readString(m.raw)
		case "ipv4":
			v4, err = readString(m.raw)
		case "ipv6":
			v6, err = readString(m.raw)
		case "allocationTimestamp":
			ts, err = readInt64(m.raw)
		case "metadata":
			hasMeta = true
			podNamespace, podName, err = readAWSMetadata(m.raw)
		default:
			return Entry{}, nil, &entryError{msg: fmt.Sprintf("unknown field %s (an entry has %s)", quote(m.key), awsEntryFields)}
		}
		if err != nil {
			return Entry{}, nil, &entryError{field: m.key, msg: err.Error()}
		}
	}
	for _, f := range []struct{ name, v string }{{"networkName", e.Network}, {"containerID", e.ContainerID}, {"ifName", e.IfName}} {
		if f.v == "" {
			return Entry{}, nil, &entryError{field: f.name, msg: "missing or empty: an entry is keyed by \"networkName\", \"containerID\" and \"ifName\""}
		}
	}
	var as []netip.Addr
	for _, f := range []struct {
		name, v string
		want4   bool
	}{{"ipv4", v4, true}, {"ipv6", v6, false}} {
		if f.v == "" {
			continue
		}
		a, err := netip.ParseAddr(f.v)
		switch {
		case err != nil || a.Zone() != "":
			return Entry{}, nil, &entryError{field: f.name, msg: fmt.Sprintf("%s is not an IP address", quote(f.v))}
		case a.Is4() != f.want4 || a.Is4In6():
			return Entry{}, nil, &entryError{field: f.name, msg: fmt.Sprintf("%s is not an %s address", quote(f.v), map[bool]string{true: "IPv4", false: "IPv6"}[f.want4])}
		}
		as = append(as, a)
		e.IPs = append(e.IPs, a.String())
	}
	switch {
	case len(as) == 0:
		return Entry{}, nil, &entryError{field: "ipv4", msg: "missing (and no \"ipv6\"): want the attachment's address"}
	case ts < 0:
		return Entry{}, nil, &entryError{field: "allocationTimestamp", msg: fmt.Sprintf("%d is negative: want nanoseconds since 1970 (0: unknown)", ts)}
	case !hasMeta:
		return Entry{}, nil, &entryError{field: "metadata", msg: "missing: want the pod's \"k8sPodNamespace\" and \"k8sPodName\""}
	case podNamespace == "":
		return Entry{}, nil, &entryError{field: "metadata.k8sPodNamespace", msg: "missing or empty: the attachments of a contiv checkpoint are kept with their pod (an entry of an AWS VPC CNI older than 1.12 lacks it)"}
	case podName == "":
		return Entry{}, nil, &entryError{field: "metadata.k8sPodName", msg: "missing or empty: the attachments of a contiv checkpoint are kept with their pod (an entry of an AWS VPC CNI older than 1.12 lacks it)"}
	}
	e.Pod = &Pod{Name: podName, Namespace: podNamespace}
	if ts > 0 {
		e.AllocatedAt = time.Unix(0, ts).UTC()
	}
	e.Metadata = map[string]string{AWSImportedFrom: AWSVersion}
	return e, as, nil
}

// readAWSMetadata reads an entry's "metadata".
func readAWSMetadata(raw []byte) (namespace, name string, err error) {
	ms, err := readObject(raw)
	if err != nil {
		return "", "", err
	}
	for _, m := range ms {
		switch m.key {
		case "k8sPodNamespace":
			namespace, err = readString(m.raw)
		case "k8sPodName":
			name, err = readString(m.raw)
		case "interfacesCount":
			_, err = readInt64(m.raw)
		default:
			return "", "", fmt.Errorf("unknown field %s (the metadata has \"k8sPodNamespace\", \"k8sPodName\", \"interfacesCount\")", quote(m.key))
		}
		if err != nil {
			return "", "", fmt.Errorf("field %q: %w", m.key, err)
		}
	}
	return namespace, name, nil
}

// readInt64 reads a JSON number that is an integer of 64 bits.
func readInt64(raw []byte) (int64, error) {
	var n json.Number
	if k := kind(raw); (k < '0' || k > '9') && k != '-' || json.Unmarshal(raw, &n) != nil {
		return 0, fmt.Errorf("want an integer, got %s", cut(string(raw)))
	}
	i, err := n.Int64()
	if err != nil {
		return 0, fmt.Errorf("want an integer of 64 bits, got %s", cut(n.String()))
	}
	return i, nil
}
