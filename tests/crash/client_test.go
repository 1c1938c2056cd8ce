package crash

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/contiv-ipam/agent/plugins/podmanager"
	"github.com/contiv-ipam/agent/plugins/podmanager/cni"
)

const (
	network = "crashnet"
	ifName  = "eth0"
	// maxHeld bounds the keys one client holds, so that 16 clients never
	// exhaust a /24 pod subnet and every Add has an address to get.
	maxHeld = 6
	// callTimeout bounds one gRPC call; a call cut by the kill fails at
	// once (the connection breaks), this is only the last resort.
	callTimeout = 10 * time.Second
)

// client is one of the concurrent CNI callers. Owner: one goroutine at a
// time (the client's goroutine while a cycle runs, the test goroutine
// between cycles); its ledger, rng and counter are never shared.
type client struct {
	id     int
	rng    *rand.Rand
	ledger *Ledger
	next   int // attempt counter: container IDs are unique per Add
	// firstErr is the first failed call of the cycle, for the message
	// of a cycle in which nothing was acknowledged.
	firstErr error
	// timeout bounds each of its Add and Delete calls (callTimeout, or
	// shorter to give up on calls that a stalled commit holds).
	timeout time.Duration
	// gaveUp are the keys of the cycle's Adds whose deadline ended
	// before the answer came.
	gaveUp []podmanager.AttachmentKey
}

func newClient(id int, seed uint64, timeout time.Duration) *client {
	return &client{id: id, rng: rand.New(rand.NewPCG(seed, uint64(id))), ledger: NewLedger(), timeout: timeout}
}

// dial connects to the agent's socket (lazily: grpc.NewClient does not
// wait for the server).
func dial(socket string) (*grpc.ClientConn, error) {
	return grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
}

// run calls Add and Delete until stop is closed or the transport fails
// (the agent was killed); acked is signalled after each acknowledged call.
func (c *client) run(rc cni.RemoteCNIClient, stop <-chan struct{}, acked func()) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		held := c.ledger.Held()
		var err error
		if len(held) < maxHeld && (len(held) == 0 || c.rng.IntN(10) < 6) {
			err = c.addNew(rc)
		} else {
			err = c.remove(rc, held[c.rng.IntN(len(held))])
		}
		if err == nil {
			acked()
			continue
		}
		if c.firstErr == nil {
			c.firstErr = err
		}
		if transportFailed(err) {
			return
		}
	}
}

// addNew adds a fresh key, for a Kubernetes pod or a plain container.
func (c *client) addNew(rc cni.RemoteCNIClient) error {
	c.next++
	cid := fmt.Sprintf("crash-c%02d-%06d", c.id, c.next)
	k := podmanager.AttachmentKey{Network: network, ContainerID: cid, IfName: ifName}
	args, pod := "", podmanager.ContainerNamespace+"/"+cid
	if c.rng.IntN(2) == 0 {
		ns, name := fmt.Sprintf("crash-ns%d", c.id%3), "pod-"+cid
		args, pod = "IgnoreUnknown=1;K8S_POD_NAMESPACE="+ns+";K8S_POD_NAME="+name, ns+"/"+name
	}
	_, err := c.add(rc, k, args, pod)
	return err
}

// add calls Add for k and records the outcome.
func (c *client) add(rc cni.RemoteCNIClient, k podmanager.AttachmentKey, args, pod string) (netip.Addr, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	reply, err := rc.Add(ctx, request(k, args))
	if err == nil {
		err = replyError(reply)
	}
	var ip netip.Addr
	if err == nil {
		ip, err = replyAddr(reply)
	}
	if err != nil {
		c.ledger.AddUnknown(k, pod)
		if status.Code(err) == codes.DeadlineExceeded {
			c.gaveUp = append(c.gaveUp, k)
		}
		return netip.Addr{}, fmt.Errorf("Add %s: %w", k, err)
	}
	c.ledger.AddOK(k, pod, ip)
	return ip, nil
}

// remove calls Delete for k and records the outcome.
func (c *client) remove(rc cni.RemoteCNIClient, k podmanager.AttachmentKey) error {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	reply, err := rc.Delete(ctx, request(k, podArgs(c.ledger.Pod(k))))
	if err == nil {
		err = replyError(reply)
	}
	if err != nil {
		c.ledger.DeleteUnknown(k)
		return fmt.Errorf("Delete %s: %w", k, err)
	}
	c.ledger.DeleteOK(k)
	return nil
}

// check calls Check for k with prevResult's address ip (the subnet's
// length does not matter: the agent compares addresses).
func check(rc cni.RemoteCNIClient, k podmanager.AttachmentKey, args string, ip netip.Addr) error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	req := request(k, args)
	req.PrevIps = []string{netip.PrefixFrom(ip, ip.BitLen()).String()}
	reply, err := rc.Check(ctx, req)
	if err == nil {
		err = replyError(reply)
	}
	if err != nil {
		return fmt.Errorf("Check %s with %s: %w", k, ip, err)
	}
	return nil
}

// podArgs is the CNI_ARGS of a pod recorded as "namespace/name".
func podArgs(pod string) string {
	ns, name, _ := strings.Cut(pod, "/")
	if ns == podmanager.ContainerNamespace || name == "" {
		return ""
	}
	return "IgnoreUnknown=1;K8S_POD_NAMESPACE=" + ns + ";K8S_POD_NAME=" + name
}

func request(k podmanager.AttachmentKey, args string) *cni.CNIRequest {
	conf := fmt.Sprintf(`{"cniVersion":"1.1.0","name":%q,"type":"contiv-cni"}`, k.Network)
	return &cni.CNIRequest{
		Version:          "1.1.0",
		ContainerId:      k.ContainerID,
		NetworkNamespace: "/var/run/netns/" + k.ContainerID,
		InterfaceName:    k.IfName,
		ExtraNwConfig:    conf,
		ExtraArguments:   args,
		NetworkName:      k.Network,
	}
}

// errReply is an answer with result ERROR.
var errReply = errors.New("the agent answered ERROR")

func replyError(r *cni.CNIReply) error {
	if r.GetResult() == cni.CNIReply_OK {
		return nil
	}
	return fmt.Errorf("%w: code %d: %s", errReply, r.GetErrorCode(), r.GetError())
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

// transportFailed tells a call the agent did not answer (killed, gone)
// from an answer with an error.
func transportFailed(err error) bool {
	if errors.Is(err, errReply) {
		return false
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return true
	}
	return false
}
