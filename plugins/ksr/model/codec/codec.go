package codec

import (
	"bytes"
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// KSRPrefix is the etcd prefix of the Kubernetes state: every model key
// (node.Key, pod.Key, vppnode.Key, ...) is relative to it.
const KSRPrefix = "/vnf-agent/contiv-ksr/"

// excerptLen is the most bytes of a value quoted in an error.
const excerptLen = 64

var (
	marshalOptions   = protojson.MarshalOptions{UseProtoNames: true}
	unmarshalOptions = protojson.UnmarshalOptions{DiscardUnknown: true}
)

// Marshal encodes m as compact JSON keyed by the proto field names
// (pod_CIDR, ip_addresses, ...). Fields at their zero value are left out.
// The output is deterministic for a given protobuf module version: fields
// in number order, map keys sorted, no whitespace.
func Marshal(m proto.Message) ([]byte, error) {
	out, err := marshalOptions.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("codec: marshal %s: %w", messageName(m), err)
	}
	// protojson inserts random whitespace to discourage byte comparisons;
	// compacting removes it so that equal messages are stored as equal
	// bytes (etcd compare-and-swap compares bytes).
	var buf bytes.Buffer
	buf.Grow(len(out))
	if err := json.Compact(&buf, out); err != nil {
		return nil, fmt.Errorf("codec: marshal %s: compact %s: %w", messageName(m), excerpt(out), err)
	}
	return buf.Bytes(), nil
}

// Unmarshal decodes data into m, replacing its contents. It accepts both
// the proto field names (pod_CIDR) and their lowerCamelCase JSON names
// (podCIDR), and ignores fields it does not know, so values written by
// other tools load. Errors name the message type and quote the start of
// data.
func Unmarshal(data []byte, m proto.Message) error {
	if m == nil || !m.ProtoReflect().IsValid() {
		return fmt.Errorf("codec: unmarshal %s: nil message", messageName(m))
	}
	if err := unmarshalOptions.Unmarshal(data, m); err != nil {
		return fmt.Errorf("codec: unmarshal %s from %s: %w", messageName(m), excerpt(data), err)
	}
	return nil
}

// messageName is the full proto name of m, or "<nil>".
func messageName(m proto.Message) string {
	if m == nil {
		return "<nil>"
	}
	return string(m.ProtoReflect().Descriptor().FullName())
}

// excerpt quotes at most excerptLen bytes of data, marking a cut with "...".
func excerpt(data []byte) string {
	if len(data) <= excerptLen {
		return fmt.Sprintf("%q", data)
	}
	return fmt.Sprintf("%q...", data[:excerptLen])
}
