package podmanager

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"unicode"

	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/podmanager/cni"
)

// The CNI_ARGS keys podmanager reads; every other key is ignored.
const (
	argPodName      = "K8S_POD_NAME"
	argPodNamespace = "K8S_POD_NAMESPACE"
	argPodUID       = "K8S_POD_UID"
)

// MaxPodUID is the longest K8S_POD_UID taken (Kubernetes UIDs are
// 36-character UUIDs).
const MaxPodUID = 128

// attachment is a validated CNIRequest: the key, the pod, the pod's UID
// ("" when CNI_ARGS has none) and its netns.
type attachment struct {
	key   AttachmentKey
	pod   podmodel.ID
	uid   string
	netns string
}

// parseRequest validates the fields every Add, Delete and Check needs and
// derives the pod ID; errors wrap ErrBadRequest and name the field.
func parseRequest(req *cni.CNIRequest) (attachment, error) {
	key, err := parseKey(req.GetNetworkName(), req.GetContainerId(), req.GetInterfaceName())
	if err != nil {
		return attachment{}, err
	}
	pod, err := podID(req.GetExtraArguments(), key.ContainerID)
	if err != nil {
		return attachment{}, err
	}
	uid, err := podUID(req.GetExtraArguments())
	if err != nil {
		return attachment{}, err
	}
	return attachment{key: key, pod: pod, uid: uid, netns: req.GetNetworkNamespace()}, nil
}

// parseKey is the attachment key of a request: every field must be set
// (errors wrap ErrBadRequest and name the field).
func parseKey(network, containerID, ifName string) (AttachmentKey, error) {
	key := AttachmentKey{Network: network, ContainerID: containerID, IfName: ifName}
	for _, f := range []struct{ name, value string }{
		{"container_id", key.ContainerID}, {"interface_name", key.IfName}, {"network_name", key.Network},
	} {
		if f.value == "" {
			return AttachmentKey{}, fmt.Errorf("%w: %s is empty", ErrBadRequest, f.name)
		}
	}
	return key, nil
}

// confirmRequest validates a ConfirmRequest: the key as Delete and Check
// take it (any non-empty names) and a non-empty reservation.
func confirmRequest(req *cni.ConfirmRequest) (AttachmentKey, string, error) {
	key, err := parseKey(req.GetNetworkName(), req.GetContainerId(), req.GetInterfaceName())
	if err != nil {
		return AttachmentKey{}, "", err
	}
	if req.GetReservation() == "" {
		return AttachmentKey{}, "", fmt.Errorf("%w: reservation is empty", ErrBadRequest)
	}
	return key, req.GetReservation(), nil
}

// podID is the pod of K8S_POD_NAME and K8S_POD_NAMESPACE in args
// ("K=V;K=V"), or {ContainerNamespace, containerID} when neither is given.
func podID(args, containerID string) (podmodel.ID, error) {
	kv, err := parseArgs(args)
	if err != nil {
		return podmodel.ID{}, err
	}
	name, namespace := kv[argPodName], kv[argPodNamespace]
	switch {
	case name == "" && namespace == "":
		return podmodel.ID{Name: containerID, Namespace: ContainerNamespace}, nil
	case name == "":
		return podmodel.ID{}, fmt.Errorf("%w: extra_arguments %q: %s=%q without %s",
			ErrBadRequest, args, argPodNamespace, namespace, argPodName)
	case namespace == "":
		return podmodel.ID{}, fmt.Errorf("%w: extra_arguments %q: %s=%q without %s",
			ErrBadRequest, args, argPodName, name, argPodNamespace)
	}
	return podmodel.ID{Name: name, Namespace: namespace}, nil
}

// podUID is K8S_POD_UID in args ("" when absent): at most MaxPodUID
// bytes of printable characters other than white space.
func podUID(args string) (string, error) {
	kv, err := parseArgs(args)
	if err != nil {
		return "", err
	}
	uid := kv[argPodUID]
	bad := strings.ContainsFunc(uid, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) })
	if bad || len(uid) > MaxPodUID {
		return "", fmt.Errorf("%w: extra_arguments: %s=%.40q: want at most %d printable characters without white space",
			ErrBadRequest, argPodUID, uid, MaxPodUID)
	}
	return uid, nil
}

// parseArgs splits CNI_ARGS into its pairs; empty segments are skipped, a
// segment without "=" or with an empty key is an error naming it. The last
// of repeated keys wins.
func parseArgs(args string) (map[string]string, error) {
	kv := map[string]string{}
	for _, pair := range strings.Split(args, ";") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%w: extra_arguments: %q is not KEY=VALUE", ErrBadRequest, pair)
		}
		kv[k] = v
	}
	return kv, nil
}

// cniName is the CNI spec's form of a container ID and a network name: an
// alphanumeric character, then alphanumerics, '_', '.' or '-'.
var cniName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$`)

// maxIfName is the longest Linux interface name (IFNAMSIZ - 1).
const maxIfName = 15

// checkNames applies the CNI spec's rules on the names of a key that is
// about to be added (Delete and Check accept any non-empty name: a key
// that could not be added holds nothing). Errors wrap ErrBadRequest.
func checkNames(key AttachmentKey) error {
	if !cniName.MatchString(key.ContainerID) {
		return fmt.Errorf("%w: container_id %q: want an alphanumeric character, then alphanumerics, '_', '.' or '-'",
			ErrBadRequest, key.ContainerID)
	}
	if !cniName.MatchString(key.Network) {
		return fmt.Errorf("%w: network_name %q: want an alphanumeric character, then alphanumerics, '_', '.' or '-'",
			ErrBadRequest, key.Network)
	}
	bad := strings.ContainsFunc(key.IfName, func(r rune) bool { return r == '/' || r == ':' || unicode.IsSpace(r) })
	if bad || len(key.IfName) > maxIfName || key.IfName == "." || key.IfName == ".." {
		return fmt.Errorf("%w: interface_name %q: want at most %d bytes, no '/', ':' or white space, not \".\" or \"..\"",
			ErrBadRequest, key.IfName, maxIfName)
	}
	return nil
}

// gcRequest validates a GCRequest into a GCPods event.
func gcRequest(req *cni.GCRequest) (*GCPods, error) {
	if req.GetNetworkName() == "" {
		return nil, fmt.Errorf("%w: network_name is empty", ErrBadRequest)
	}
	ev := NewGCPods()
	ev.Network = req.GetNetworkName()
	for i, a := range req.GetValidAttachments() {
		if a.GetContainerId() == "" || a.GetInterfaceName() == "" {
			return nil, fmt.Errorf("%w: valid_attachments[%d] (container_id %q, interface_name %q): both must be set",
				ErrBadRequest, i, a.GetContainerId(), a.GetInterfaceName())
		}
		ev.Valid = append(ev.Valid, AttachmentKey{
			Network: ev.Network, ContainerID: a.GetContainerId(), IfName: a.GetInterfaceName(),
		})
	}
	return ev, nil
}

// prevAddresses parses CHECK's prev_ips (CIDR, or a bare address).
func prevAddresses(prev []string) ([]netip.Addr, error) {
	out := make([]netip.Addr, 0, len(prev))
	for i, s := range prev {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Addr().Unmap())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("%w: prev_ips[%d] %q is not an address or CIDR", ErrBadRequest, i, s)
		}
		out = append(out, a.Unmap())
	}
	return out, nil
}

// addReply is the OK reply of an AddPod the handlers filled.
func addReply(ev *AddPod) (*cni.CNIReply, error) {
	if len(ev.Interfaces) == 0 {
		return nil, fmt.Errorf("no handler configured an interface for %s (pod %s): is IPAM wired?", ev.Key, ev.Pod)
	}
	reply := &cni.CNIReply{Result: cni.CNIReply_OK, Reservation: ev.Reservation}
	for _, itf := range ev.Interfaces {
		out := &cni.CNIReply_Interface{Name: itf.Name, Sandbox: itf.Sandbox}
		for _, ip := range itf.IPAddresses {
			out.IpAddresses = append(out.IpAddresses, &cni.CNIReply_Interface_IP{
				Version: ipVersion(ip.Address.Addr()), Address: ip.Address.String(), Gateway: addrString(ip.Gateway),
			})
		}
		reply.Interfaces = append(reply.Interfaces, out)
	}
	for _, r := range ev.Routes {
		reply.Routes = append(reply.Routes, &cni.CNIReply_Route{Dst: r.Dst.String(), Gw: addrString(r.Gw)})
	}
	return reply, nil
}

func ipVersion(a netip.Addr) cni.CNIReply_Interface_IP_Version {
	if a.Is4() || a.Is4In6() {
		return cni.CNIReply_Interface_IP_IPV4
	}
	return cni.CNIReply_Interface_IP_IPV6
}

// addrString is "" for the zero address.
func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}
