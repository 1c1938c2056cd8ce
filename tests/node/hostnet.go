//go:build node

package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// hostNetwork makes the node's network namespace its host network
// (Options.NoContiv): kubelet is to run in it, the API server's address
// (127.0.0.1:<port>, the name its serving certificate holds) answers in
// it through a Bridge to the API server on the machine's loopback, and
// kubelet's port and healthz port answer on the machine's loopback (the
// ports were chosen free there) through Bridges into the namespace, for
// the API server (logs, exec) and WaitHealthy.
func (n *Node) hostNetwork() error {
	u, err := url.Parse(n.Kube.Config.Host)
	if err != nil {
		return fmt.Errorf("node: API server address %q: %w", n.Kube.Config.Host, err)
	}
	api := u.Host
	ns := n.NetNSPath()
	n.Kubelet.netns = ns
	routes := []struct{ from, to Endpoint }{
		{Endpoint{ns, api}, Endpoint{"", api}},
	}
	for _, port := range []int{n.Kubelet.Port, n.Kubelet.HealthzPort} {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		routes = append(routes, struct{ from, to Endpoint }{Endpoint{"", addr}, Endpoint{ns, addr}})
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
