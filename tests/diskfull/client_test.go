//go:build linux

package diskfull

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/contiv-ipam/agent/plugins/podmanager"
	"github.com/contiv-ipam/agent/plugins/podmanager/cni"
)

const (
	network = "diskfull"
	ifName  = "eth0"
	// callTimeout bounds one gRPC call (the agent's requestTimeout is
	// 10 s: it answers before).
	callTimeout = 15 * time.Second
)

// outcome is what the agent answered one ADD.
type outcome struct {
	key  podmanager.AttachmentKey
	addr netip.Addr // when acknowledged
	err  error      // when not: the reply's error (code and text)
	code uint32     // the reply's error code; 0 for a transport error
}

// client adds fresh keys over its own connection. Owner: one goroutine
// at a time; its outcomes are read by the test goroutine after it has
// returned.
type client struct {
	id   int
	rc   cni.RemoteCNIClient
	next int // attempt counter: each ADD is of a new container ID
	acks []outcome
	fail []outcome
}

// dial connects to the agent's socket (lazily: grpc.NewClient does not
// wait for the server).
func dial(socket string) (*grpc.ClientConn, error) {
	return grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
}

// addNew adds a new key (a plain container: no Kubernetes pod) and
// records the outcome.
func (c *client) addNew(phase string) outcome {
	c.next++
	k := podmanager.AttachmentKey{Network: network, ContainerID: fmt.Sprintf("df-%s-c%02d-%05d", phase, c.id, c.next), IfName: ifName}
	o := add(c.rc, k)
	if o.err != nil {
		c.fail = append(c.fail, o)
	} else {
		c.acks = append(c.acks, o)
	}
	return o
}

// add calls ADD for k.
func add(rc cni.RemoteCNIClient, k podmanager.AttachmentKey) outcome {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	o := outcome{key: k}
	reply, err := rc.Add(ctx, request(k))
	switch {
	case err != nil:
		o.err = fmt.Errorf("ADD %s: %w", k, err)
	case reply.GetResult() != cni.CNIReply_OK:
		o.code = reply.GetErrorCode()
		o.err = fmt.Errorf("ADD %s: code %d: %s", k, o.code, reply.GetError())
	default:
		o.addr, o.err = replyAddr(reply)
	}
	return o
}

// errNoAllocation is a CHECK that says the key holds no address.
var errNoAllocation = errors.New("CHECK: the key holds no address")

// check calls CHECK for k, with prevResult ip when it is valid; it
// returns errNoAllocation when the agent answers that k holds nothing.
func check(rc cni.RemoteCNIClient, k podmanager.AttachmentKey, ip netip.Addr) error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	req := request(k)
	if ip.IsValid() {
		req.PrevIps = []string{netip.PrefixFrom(ip, ip.BitLen()).String()}
	}
	reply, err := rc.Check(ctx, req)
	switch {
	case err != nil:
		return fmt.Errorf("CHECK %s: %w", k, err)
	case reply.GetResult() == cni.CNIReply_OK:
		return nil
	case reply.GetErrorCode() == cni.CodeCheckFailed && !ip.IsValid():
		return fmt.Errorf("%w: %s: %s", errNoAllocation, k, reply.GetError())
	}
	return fmt.Errorf("CHECK %s with %v: code %d: %s", k, ip, reply.GetErrorCode(), reply.GetError())
}

func request(k podmanager.AttachmentKey) *cni.CNIRequest {
	return &cni.CNIRequest{
		Version:          "1.1.0",
		ContainerId:      k.ContainerID,
		NetworkNamespace: "/var/run/netns/" + k.ContainerID,
		InterfaceName:    k.IfName,
		ExtraNwConfig:    fmt.Sprintf(`{"cniVersion":"1.1.0","name":%q,"type":"contiv-cni"}`, k.Network),
		NetworkName:      k.Network,
	}
}

// replyAddr is the address of the reply's single interface.
func replyAddr(r *cni.CNIReply) (netip.Addr, error) {
	ifs := r.GetInterfaces()
	if len(ifs) != 1 || len(ifs[0].GetIpAddresses()) != 1 {
		return netip.Addr{}, fmt.Errorf("reply interfaces %v: want one interface with one address", ifs)
	}
	p, err := netip.ParsePrefix(ifs[0].GetIpAddresses()[0].GetAddress())
	if err != nil {
		return netip.Addr{}, fmt.Errorf("reply address: %w", err)
	}
	return p.Addr(), nil
}
