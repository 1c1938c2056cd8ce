//go:build node

package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os/exec"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HostNetworkIP is the node's address with Options.NoContiv: an address
// of TEST-NET-1 (RFC 5737, never routed) on the loopback of the node's
// network namespace, kubelet's --node-ip, so the host-network pods'
// status.podIP. kubelet refuses 127.0.0.1 as a node address (the Node
// then has none, and a host-network pod no status.podIP).
const HostNetworkIP = "192.0.2.1"

// hostNetwork makes the node's network namespace its host network
// (Options.NoContiv): kubelet is to run in it with HostNetworkIP as its
// node address; the API server's address (127.0.0.1:<port>, the name its
// serving certificate holds) answers in it through a Bridge to the API
// server on the machine's loopback, and kubelet's healthz port on the
// machine's loopback (it was chosen free there) through a Bridge into
// the namespace, for WaitHealthy. Nothing makes kubelet's own port
// reachable from the API server (logs, exec): the API server would dial
// the Node's address, which is only inside the namespace.
func (n *Node) hostNetwork() error {
	u, err := url.Parse(n.Kube.Config.Host)
	if err != nil {
		return fmt.Errorf("node: API server address %q: %w", n.Kube.Config.Host, err)
	}
	ns := n.NetNSPath()
	if err := addLoopbackAddr(ns, netip.MustParseAddr(HostNetworkIP)); err != nil {
		return fmt.Errorf("node: %w", err)
	}
	n.Kubelet.netns, n.Kubelet.nodeIP = ns, HostNetworkIP
	healthz := net.JoinHostPort("127.0.0.1", strconv.Itoa(n.Kubelet.HealthzPort))
	routes := []struct{ from, to Endpoint }{
		{Endpoint{ns, u.Host}, Endpoint{"", u.Host}},
		{Endpoint{"", healthz}, Endpoint{ns, healthz}},
	}
	for _, r := range routes {
		b, err := NewBridge(r.from, r.to)
		if err != nil {
			return fmt.Errorf("node: %w", err)
		}
		n.bridges = append(n.bridges, b)
	}
	return nil
}

// addLoopbackAddr adds ip/32 (or /128) to lo in the network namespace
// netns.
func addLoopbackAddr(netns string, ip netip.Addr) error {
	prefix := netip.PrefixFrom(ip, ip.BitLen())
	out, err := exec.Command("nsenter", "--net="+netns, "ip", "addr", "add", prefix.String(), "dev", "lo").CombinedOutput()
	if err != nil {
		return fmt.Errorf("add %s to lo in %s: %w: %s", prefix, netns, err, out)
	}
	return nil
}

// closeBridges closes the bridges of hostNetwork.
func (n *Node) closeBridges() error {
	var errs []error
	for _, b := range n.bridges {
		errs = append(errs, b.Close())
	}
	n.bridges = nil
	return errors.Join(errs...)
}

// waitRegistered waits until kubelet has created the Node object.
func (n *Node) waitRegistered(ctx context.Context, timeout time.Duration) error {
	err := poll(ctx, timeout, func() (bool, error) {
		_, err := n.Kube.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return fmt.Errorf("node %s not registered: %w; %s", n.Name, err, tailFile(n.Kubelet.Log(), 10))
	}
	return nil
}
