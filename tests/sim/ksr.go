package sim

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	"github.com/contiv-ipam/agent/plugins/ksr/model/mirror"
	"github.com/contiv-ipam/agent/plugins/ksr/model/node"
	"github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// KSR is the simulation's contiv-ksr: one etcd client that writes Nodes,
// pods (in the per-node layout) and the mirror marker with the models,
// at the keys and in the encoding contiv-ksr uses (plugins/ksr). Safe
// for concurrent use; the heartbeat goroutine only writes the marker.
type KSR struct {
	cli      *clientv3.Client
	interval time.Duration
	pods     atomic.Int64 // pods mirrored, for the marker
	version  atomic.Int64 // the marker's resource version
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once
}

// newKSR starts the heartbeat: a marker at once, then every interval.
func newKSR(ctx context.Context, cli *clientv3.Client, interval time.Duration) (*KSR, error) {
	k := &KSR{cli: cli, interval: interval, stop: make(chan struct{}), done: make(chan struct{})}
	if err := k.beat(ctx); err != nil {
		return nil, err
	}
	go k.heartbeat()
	return k, nil
}

func (k *KSR) heartbeat() {
	defer close(k.done)
	t := time.NewTicker(k.interval)
	defer t.Stop()
	for {
		select {
		case <-k.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), k.interval)
			_ = k.beat(ctx) // an etcd member down: the next beat writes it
			cancel()
		}
	}
}

// beat writes the mirror marker as contiv-ksr's leader does.
func (k *KSR) beat(ctx context.Context) error {
	m := mirror.Marker{Leader: "sim-ksr", ResourceVersion: strconv.FormatInt(k.version.Add(1), 10),
		Pods: int(k.pods.Load()), Heartbeat: time.Now().UTC(), Interval: k.interval.String()}
	if _, err := k.cli.Put(ctx, codec.KSRPrefix+mirror.Key, string(m.Encode())); err != nil {
		return fmt.Errorf("ksr: marker: %w", err)
	}
	return nil
}

// Close stops the heartbeat.
func (k *KSR) Close() {
	k.once.Do(func() { close(k.stop); <-k.done })
}

// NodeIP is the InternalIP of the index-th node: 198.18.0.0/15 (the
// benchmark range) from .0.1 on.
func NodeIP(index int) netip.Addr {
	b := netip.MustParseAddr("198.18.0.0").As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += uint32(index) + 1
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// PutNode writes the Kubernetes Node name with its InternalIP.
func (k *KSR) PutNode(ctx context.Context, name string, ip netip.Addr) error {
	data, err := codec.Marshal(&node.Node{Name: name,
		Addresses: []*node.NodeAddress{{Type: node.NodeAddress_NodeInternalIP, Address: ip.String()},
			{Type: node.NodeAddress_NodeHostName, Address: name}}})
	if err != nil {
		return err
	}
	if _, err := k.cli.Put(ctx, codec.KSRPrefix+node.Key(name), string(data)); err != nil {
		return fmt.Errorf("ksr: put node %s: %w", name, err)
	}
	return nil
}

// DeleteNode deletes the Node name and every pod under its prefix.
func (k *KSR) DeleteNode(ctx context.Context, name string) error {
	if _, err := k.cli.Delete(ctx, codec.KSRPrefix+node.Key(name)); err != nil {
		return fmt.Errorf("ksr: delete node %s: %w", name, err)
	}
	resp, err := k.cli.Delete(ctx, codec.KSRPrefix+pod.NodePrefix(name), clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("ksr: delete the pods of node %s: %w", name, err)
	}
	k.pods.Add(-resp.Deleted)
	return nil
}

// Pod is a pod of the simulation as contiv-ksr mirrors it.
type Pod struct {
	Node, Name, Namespace, UID string
	HostIP                     netip.Addr
	IP                         netip.Addr // invalid until the pod has one
}

// Key is the pod's etcd key (with the KSR prefix).
func (p *Pod) Key() string { return codec.KSRPrefix + p.RelKey() }

// RelKey is the pod's key relative to codec.KSRPrefix, as the agents'
// KubeStateChange carries it.
func (p *Pod) RelKey() string { return pod.NodeKey(p.Node, p.Name, p.Namespace) }

// model is the value contiv-ksr writes (plugins/ksr podModel): the
// scheduled pod, with its address once the kubelet reported one.
func (p *Pod) model() *pod.Pod {
	m := &pod.Pod{Name: p.Name, Namespace: p.Namespace, Uid: p.UID, HostIpAddress: p.HostIP.String(),
		Labels: map[string]string{"app": "sim"}, Label: []*pod.Pod_Label{{Key: "app", Value: "sim"}},
		Container: []*pod.Pod_Container{{Name: "main"}}}
	if p.IP.IsValid() {
		m.IpAddress = p.IP.String()
		m.IpAddresses = []string{p.IP.String()}
	}
	return m
}

// PutPod writes the pod; created says whether it is new (for the
// marker's count).
func (k *KSR) PutPod(ctx context.Context, p *Pod, created bool) error {
	data, err := codec.Marshal(p.model())
	if err != nil {
		return err
	}
	if _, err := k.cli.Put(ctx, p.Key(), string(data)); err != nil {
		return fmt.Errorf("ksr: put pod %s: %w", p.RelKey(), err)
	}
	if created {
		k.pods.Add(1)
	}
	return nil
}

// DeletePod deletes the pod's key.
func (k *KSR) DeletePod(ctx context.Context, p *Pod) error {
	if _, err := k.cli.Delete(ctx, p.Key()); err != nil {
		return fmt.Errorf("ksr: delete pod %s: %w", p.RelKey(), err)
	}
	k.pods.Add(-1)
	return nil
}
