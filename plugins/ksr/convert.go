package ksr

import (
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/contiv-ipam/agent/plugins/ksr/model/namespace"
	"github.com/contiv-ipam/agent/plugins/ksr/model/node"
	"github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// AnnotationPrefix selects the annotations that are mirrored: only keys
// that start with it (contivpp.io/..., as in Contiv) reach etcd; the
// others (kubectl's last-applied configuration, ...) are large and of no
// use to the agents.
const AnnotationPrefix = "contivpp.io"

// nodeModel is the part of a Kubernetes Node the agents read:
// spec.podCIDR is pod_CIDR and spec.podCIDRs (every family, in order)
// pod_CIDRs.
func nodeModel(n *corev1.Node) *node.Node {
	m := &node.Node{
		Name:        n.Name,
		Pod_CIDR:    n.Spec.PodCIDR,
		Pod_CIDRs:   slices.Clone(n.Spec.PodCIDRs),
		Provider_ID: n.Spec.ProviderID,
	}
	for _, a := range n.Status.Addresses {
		m.Addresses = append(m.Addresses, &node.NodeAddress{Type: addressType(a.Type), Address: a.Address})
	}
	if info := n.Status.NodeInfo; info != (corev1.NodeSystemInfo{}) {
		m.NodeInfo = nodeInfo(info)
	}
	return m
}

// addressType maps a Kubernetes address type onto the model's enum.
func addressType(t corev1.NodeAddressType) node.NodeAddress_NodeAddressType {
	switch t {
	case corev1.NodeHostName:
		return node.NodeAddress_NodeHostName
	case corev1.NodeExternalIP:
		return node.NodeAddress_NodeExternalIP
	case corev1.NodeInternalIP:
		return node.NodeAddress_NodeInternalIP
	case corev1.NodeExternalDNS:
		return node.NodeAddress_NodeExternalDNS
	case corev1.NodeInternalDNS:
		return node.NodeAddress_NodeInternalDNS
	}
	return node.NodeAddress_NodeUnknown
}

func nodeInfo(i corev1.NodeSystemInfo) *node.NodeSystemInfo {
	return &node.NodeSystemInfo{
		Machine_ID:              i.MachineID,
		System_UUID:             i.SystemUUID,
		Boot_ID:                 i.BootID,
		KernelVersion:           i.KernelVersion,
		OsImage:                 i.OSImage,
		ContainerRuntimeVersion: i.ContainerRuntimeVersion,
		KubeletVersion:          i.KubeletVersion,
		//lint:ignore SA1019 older kubelets still report it, and the model has the field
		KubeProxyVersion: i.KubeProxyVersion,
		OperatingSystem:  i.OperatingSystem,
		Architecture:     i.Architecture,
	}
}

// podModel is the part of a Kubernetes Pod the agents read: status.podIP
// is ip_address, status.podIPs (every family, in order) ip_addresses,
// status.hostIP host_ip_address.
func podModel(p *corev1.Pod) *pod.Pod {
	m := &pod.Pod{
		Name:          p.Name,
		Namespace:     p.Namespace,
		Uid:           string(p.UID),
		IpAddress:     p.Status.PodIP,
		HostIpAddress: p.Status.HostIP,
		Labels:        copyMap(p.Labels),
		Annotations:   contivAnnotations(p.Annotations),
	}
	for _, ip := range p.Status.PodIPs {
		m.IpAddresses = append(m.IpAddresses, ip.IP)
	}
	for _, k := range sortedKeys(p.Labels) {
		m.Label = append(m.Label, &pod.Pod_Label{Key: k, Value: p.Labels[k]})
	}
	for _, c := range p.Spec.Containers {
		mc := &pod.Pod_Container{Name: c.Name}
		for _, port := range c.Ports {
			mc.Port = append(mc.Port, &pod.Pod_Container_Port{
				Name:          port.Name,
				HostPort:      port.HostPort,
				ContainerPort: port.ContainerPort,
				Protocol:      protocol(port.Protocol),
				HostIpAddress: port.HostIP,
			})
		}
		m.Container = append(m.Container, mc)
	}
	return m
}

// protocol maps a Kubernetes protocol onto the model's enum ("" is TCP).
func protocol(p corev1.Protocol) pod.Pod_Container_Port_Protocol {
	switch p {
	case corev1.ProtocolUDP:
		return pod.Pod_Container_Port_UDP
	case corev1.ProtocolSCTP:
		return pod.Pod_Container_Port_SCTP
	}
	return pod.Pod_Container_Port_TCP
}

// namespaceModel is the part of a Kubernetes Namespace the agents read.
func namespaceModel(n *corev1.Namespace) *namespace.Namespace {
	m := &namespace.Namespace{
		Name:        n.Name,
		Labels:      copyMap(n.Labels),
		Annotations: contivAnnotations(n.Annotations),
	}
	for _, k := range sortedKeys(n.Labels) {
		m.Label = append(m.Label, &namespace.Namespace_Label{Key: k, Value: n.Labels[k]})
	}
	return m
}

// contivAnnotations keeps the annotations whose key starts with
// AnnotationPrefix; nil when there are none.
func contivAnnotations(a map[string]string) map[string]string {
	var out map[string]string
	for k, v := range a {
		if strings.HasPrefix(k, AnnotationPrefix) {
			if out == nil {
				out = make(map[string]string)
			}
			out[k] = v
		}
	}
	return out
}

// copyMap copies m; nil when m is empty.
func copyMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// sortedKeys returns the keys of m in order (the list form of the labels
// must not depend on map order: equal objects give equal bytes).
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
