package api

import "google.golang.org/protobuf/proto"

// KubeStateData is the Kubernetes state the resyncs see: resource keyword
// ("node", "pod", "vppnode", ...) -> key -> value. Keys are the etcd keys
// without the "/vnf-agent/contiv-ksr/" prefix.
type KubeStateData map[string]KubeResourceData

// KubeResourceData is one resource's values by key.
type KubeResourceData map[string]proto.Message

// Clone copies the maps (not the messages, which are never modified).
func (s KubeStateData) Clone() KubeStateData {
	out := make(KubeStateData, len(s))
	for kw, data := range s {
		c := make(KubeResourceData, len(data))
		for k, v := range data {
			c[k] = v
		}
		out[kw] = c
	}
	return out
}

// Apply sets (value != nil) or removes (value == nil) one key.
func (s KubeStateData) Apply(resource, key string, value proto.Message) {
	data := s[resource]
	if value == nil {
		delete(data, key)
		return
	}
	if data == nil {
		data = make(KubeResourceData)
		s[resource] = data
	}
	data[key] = value
}

// Len counts the values of every resource.
func (s KubeStateData) Len() int {
	n := 0
	for _, data := range s {
		n += len(data)
	}
	return n
}
