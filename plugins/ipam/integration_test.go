package ipam_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/contiv-ipam/agent/infra/agent"
	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/kvdb/bolt"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/infra/rest"
	"github.com/contiv-ipam/agent/infra/rest/resttest"
	"github.com/contiv-ipam/agent/infra/servicelabel"
	"github.com/contiv-ipam/agent/plugins/contivconf"
	"github.com/contiv-ipam/agent/plugins/controller"
	"github.com/contiv-ipam/agent/plugins/ipam"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	"github.com/contiv-ipam/agent/plugins/ksr/model/mirror"
	"github.com/contiv-ipam/agent/plugins/ksr/model/node"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/nodesync"
)

func noEnv(string) (string, bool) { return "", false }

// stack is a whole agent minus the binary: etcd client, bolt, contivconf,
// nodesync, ipam and the controller, on a real etcd.
type stack struct {
	agent *agent.Agent
	ipam  *ipam.Plugin
	ctrl  *controller.Plugin
	http  *resttest.Server
}

func startStack(t *testing.T, endpoint, yaml string) *stack {
	t.Helper()
	return startStackWith(t, stackOpts{endpoint: endpoint, yaml: yaml})
}

// stackOpts tune startStackWith.
type stackOpts struct {
	endpoint, yaml string
	boltPath       string // "" = a fresh file
	etcdDown       bool   // etcd is down: start anyway, resync from the bolt mirror
	presence       bool   // nodesync holds a presence lease (1s) and stores its ID in bolt
	grace          time.Duration
}

func startStackWith(t *testing.T, o stackOpts) *stack {
	t.Helper()
	if o.boltPath == "" {
		o.boltPath = filepath.Join(t.TempDir(), "bolt.db")
	}
	srv := resttest.New(t)
	s, err := buildStack(o, quietLog(), srv.Plugin)
	if err != nil {
		t.Fatal(err)
	}
	s.http = srv
	t.Cleanup(func() { _ = s.agent.Stop() })
	return s
}

// buildStack starts the stack (without a *testing.T: the chaos test's
// child process builds it too); httpP may be nil.
func buildStack(o stackOpts, log *slog.Logger, httpP rest.HTTPHandlers) (*stack, error) {
	ec := etcd.DefaultConfig()
	ec.Endpoints = []string{o.endpoint}
	if o.etcdDown {
		ec.AllowDelayedStart = true
		ec.DialTimeout = 300 * time.Millisecond
	}
	etcdP := etcd.NewPlugin(etcd.UseConf(ec), etcd.UseEnv(noEnv), etcd.UseDeps(func(d *etcd.Deps) {
		d.Cfg, d.Log = config.NoFile, log
	}))
	bc := bolt.DefaultConfig()
	bc.DBPath = o.boltPath
	boltP := bolt.NewPlugin(bolt.UseConf(bc), bolt.UseDeps(func(d *bolt.Deps) { d.Cfg, d.Log = config.NoFile, log }))
	label := servicelabel.NewPlugin(servicelabel.UseLabel(thisNode), servicelabel.UseDeps(func(d *servicelabel.Deps) { d.Log = log }))
	cfg, err := contivconf.DecodeConfig([]byte(o.yaml), "test contiv.conf")
	if err != nil {
		return nil, err
	}
	s := &stack{}
	loop := &controller.LoopRef{}
	conf := contivconf.NewPlugin(contivconf.UseConf(cfg), contivconf.UseDeps(func(d *contivconf.Deps) {
		d.Log, d.ServiceLabel = log, label
	}))
	nsOpts := []nodesync.Option{nodesync.UseDeps(func(d *nodesync.Deps) {
		d.Log, d.ServiceLabel, d.DB, d.EventLoop = log, label, etcdP, loop
		if o.presence {
			d.Presence, d.LocalDB = etcdP, boltP
		}
	})}
	if o.presence {
		nc := nodesync.DefaultConfig()
		nc.PresenceTTL = time.Second
		nsOpts = append(nsOpts, nodesync.UseConf(nc))
	}
	ns := nodesync.NewPlugin(nsOpts...)
	ipamOpts := []ipam.Option{ipam.UseDeps(func(d *ipam.Deps) {
		d.Log, d.ContivConf, d.NodeSync, d.ServiceLabel = log, conf, ns, label
		d.LocalDB, d.HTTP = boltP, httpP
	})}
	if o.grace != 0 {
		ic := ipam.DefaultConfig()
		ic.AbsentPodGracePeriod = o.grace
		ipamOpts = append(ipamOpts, ipam.UseConf(ic))
	}
	s.ipam = ipam.NewPlugin(ipamOpts...)
	cc := controller.DefaultConfig()
	cc.DelayLocalResync = 300 * time.Millisecond
	s.ctrl = controller.NewPlugin(controller.UseConf(cc), controller.UseLoopRef(loop),
		controller.UseHandlers(conf, ns, s.ipam), controller.UseDeps(func(d *controller.Deps) {
			d.Cfg, d.Log = config.NoFile, log
			d.RemoteDB, d.LocalDB, d.HTTP = etcdP, boltP, httpP
		}))
	a, err := agent.NewAgent(agent.Plugins(etcdP, boltP, label, conf, ns, s.ipam, s.ctrl), agent.Args(nil), agent.Logger(log))
	if err != nil {
		return nil, err
	}
	if err := a.Start(); err != nil {
		return nil, err
	}
	s.agent = a
	return s, nil
}

func putNodeRecord(t *testing.T, srv *etcdtest.Server, podCIDR string) {
	t.Helper()
	data, err := codec.Marshal(&node.Node{Name: thisNode, Pod_CIDR: podCIDR,
		Addresses: []*node.NodeAddress{{Type: node.NodeAddress_NodeInternalIP, Address: "192.168.56.101"}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := srv.Client(t).Put(ctx, codec.KSRPrefix+node.Key(thisNode), string(data)); err != nil {
		t.Fatal(err)
	}
}

// podSubnet reads podSubnetThisNode from GET /contiv/v1/ipam.
func (s *stack) podSubnet() string {
	_, body := s.http.Get(ipam.IPAMPath)
	var info ipam.NodeIPAMInfo
	if json.Unmarshal([]byte(body), &info) != nil {
		return ""
	}
	return info.PodSubnetThisNode
}

// External IPAM end to end: a new pod_CIDR written into etcd under the
// kube-state prefix moves this node's pod subnet and re-initialises the
// allocations, through KubeStateChange -> NodeUpdate -> PodCIDRChange.
func TestExternalIPAMFollowsThePodCIDRInEtcd(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	putNodeRecord(t, srv, "10.1.7.0/24")
	s := startStack(t, srv.Endpoint(), `
ipamConfig:
  useExternalIPAM: true
  nodeInterconnectCIDR: 192.168.16.0/24
`)
	g.Eventually(s.podSubnet, 10*time.Second).Should(Equal("10.1.7.0/24"))
	ip, err := s.ipam.AllocatePodIP(pod1, "host-local", `{"version":"4","address":"10.1.7.5/24","gateway":"10.1.7.1"}`)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ip.String()).To(Equal("10.1.7.5"))

	putNodeRecord(t, srv, "10.1.8.0/24")
	g.Eventually(s.podSubnet, 10*time.Second).Should(Equal("10.1.8.0/24"))
	g.Expect(s.ipam.GetPodIP(pod1)).To(BeNil(), "allocations re-initialised on the new CIDR")
	g.Expect(s.ipam.PodGatewayIP().String()).To(Equal("10.1.8.1"))

	// The event is recorded once its processing ended, just after IPAM
	// switched to the new subnet.
	history := func() string { _, b := s.http.Get(controller.EventHistoryPath); return b }
	g.Eventually(history, 5*time.Second).Should(ContainSubstring(`"Name": "Pod CIDR Change"`))
	body := history()
	g.Expect(body).To(ContainSubstring(`"Name": "Node Update"`))
	g.Expect(body).To(ContainSubstring(`"Name": "Pod CIDR Change"`))
	g.Expect(body).To(ContainSubstring("LocalPodCIDR: 10.1.8.0/24"))
	g.Expect(strings.Count(body, `"Name": "Pod CIDR Change"`)).To(Equal(1))
}

// Without external IPAM the node ID from etcd decides the pod subnet, and
// pods deleted from Kubernetes give their address back.
func TestNodeIDFromEtcdDecidesTheAddresses(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	ctx := context.Background()
	// Another node holds ID 1: this one gets 2.
	_, err := srv.Client(t).Put(ctx, codec.KSRPrefix+"allocatedIDs/1", `{"id":1,"name":"other"}`)
	g.Expect(err).NotTo(HaveOccurred())
	s := startStackWith(t, stackOpts{endpoint: srv.Endpoint(), yaml: "ipamConfig:\n  nodeInterconnectCIDR: 192.168.16.0/24\n", grace: 200 * time.Millisecond})
	g.Eventually(s.podSubnet, 10*time.Second).Should(Equal("10.1.2.0/24"))
	hb := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	putMarker(t, srv, hb, 0)
	_, body := s.http.Get(ipam.IPAMPath)
	g.Expect(body).To(ContainSubstring(`"nodeIP": "192.168.16.2"`))

	ip, err := s.ipam.AllocatePodIP(pod1, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	pod := &podmodel.Pod{Name: pod1.Name, Namespace: pod1.Namespace, IpAddress: ip.String()}
	data, err := codec.Marshal(pod)
	g.Expect(err).NotTo(HaveOccurred())
	key := codec.KSRPrefix + podmodel.Key(pod.Name, pod.Namespace)
	_, err = srv.Client(t).Put(ctx, key, string(data))
	g.Expect(err).NotTo(HaveOccurred())
	putMarker(t, srv, hb.Add(time.Second), 0) // contiv-ksr's mirror is alive, and newer than the allocation
	_, err = srv.Client(t).Delete(ctx, key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() bool { return s.ipam.GetPodIP(pod1) == nil }, 10*time.Second).Should(BeTrue())
}

// putMarker writes contiv-ksr's mirror marker with heartbeat hb and a
// count of pods to etcd.
func putMarker(t *testing.T, srv *etcdtest.Server, hb time.Time, pods int) {
	t.Helper()
	m := mirror.Marker{Leader: "ksr-test", ResourceVersion: "1", Pods: pods, Heartbeat: hb, Interval: testBeatInterval}
	if _, err := srv.Client(t).Put(context.Background(), codec.KSRPrefix+mirror.Key, string(m.Encode())); err != nil {
		t.Fatal(err)
	}
}

// An agent restarted while etcd is down resyncs from the bolt mirror: it
// keeps its node ID (from the mirrored vppnode record), its addresses and
// its pod allocations, and serves them.
func TestRestartWithEtcdDownKeepsTheNodeAndItsPods(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	ctx := context.Background()
	_, err := srv.Client(t).Put(ctx, codec.KSRPrefix+"allocatedIDs/1", `{"id":1,"name":"other"}`)
	g.Expect(err).NotTo(HaveOccurred())
	boltPath := filepath.Join(t.TempDir(), "bolt.db")
	yaml := "ipamConfig:\n  nodeInterconnectCIDR: 192.168.16.0/24\n"
	first := startStackWith(t, stackOpts{endpoint: srv.Endpoint(), yaml: yaml, boltPath: boltPath})
	g.Eventually(first.podSubnet, 10*time.Second).Should(Equal("10.1.2.0/24"))
	ip, err := first.ipam.AllocatePodIP(pod1, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	// The mirror holds this node's vppnode record once the watcher saw it.
	g.Eventually(func() string {
		_, b := first.http.Get(controller.EventHistoryPath)
		return b
	}, 10*time.Second).Should(ContainSubstring("allocatedIDs/2"))
	g.Expect(first.agent.Stop()).To(Succeed())
	srv.Stop()

	second := startStackWith(t, stackOpts{endpoint: srv.Endpoint(), yaml: yaml, boltPath: boltPath, etcdDown: true})
	g.Eventually(second.podSubnet, 10*time.Second).Should(Equal("10.1.2.0/24"))
	g.Expect(second.ipam.GetPodIP(pod1).IP).To(Equal(ip))
	g.Eventually(func() string { _, b := second.http.Get(controller.EventHistoryPath); return b }, 5*time.Second).
		Should(ContainSubstring("DB Resync (local DB"))
}

// Bad values in etcd never take the node down: with external IPAM, a
// node pod_CIDR that is garbage or too small at start leaves IPAM waiting
// (the agent runs); a valid one initialises it; a bad one later is
// ignored and recorded in the event history, and the loop goes on.
func TestBadPodCIDRsInEtcdNeverStopTheAgent(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	putNodeRecord(t, srv, "garbage")
	s := startStack(t, srv.Endpoint(), `
ipamConfig:
  useExternalIPAM: true
  nodeInterconnectCIDR: 192.168.16.0/24
`)
	reply := func() string { st, b := s.http.Get(ipam.IPAMPath); return fmt.Sprint(st, " ", b) }
	g.Eventually(reply, 10*time.Second).Should(And(HavePrefix(fmt.Sprint(http.StatusServiceUnavailable)),
		ContainSubstring(`pod_CIDR \"garbage\"`)), "waiting, with the reason")

	putNodeRecord(t, srv, "10.1.9.0/31")
	putNodeRecord(t, srv, "10.1.9.0/24")
	g.Eventually(s.podSubnet, 10*time.Second).Should(Equal("10.1.9.0/24"))

	putNodeRecord(t, srv, "10.1.10.0/31")
	history := func() string { _, b := s.http.Get(controller.EventHistoryPath); return b }
	g.Eventually(history, 10*time.Second).Should(ContainSubstring("10.1.10.0/31"))
	g.Expect(history()).To(ContainSubstring("ignored"))
	g.Expect(s.podSubnet()).To(Equal("10.1.9.0/24"))

	putNodeRecord(t, srv, "10.1.11.0/24")
	g.Eventually(s.podSubnet, 10*time.Second).Should(Equal("10.1.11.0/24"), "the loop is alive")
}

// burstWait bounds the releases of the burst: 10,000 bolt transactions
// and as many events, about ten times slower under the race detector,
// on 2 cores that may be shared (each poll reads every candidate).
var burstWait = map[bool]time.Duration{false: 2 * time.Minute, true: 6 * time.Minute}[raceOn]

// A burst of 10,000 pod deletes in etcd (one transaction): no change is
// dropped on the way, and every address is released.
func TestABurstOf10000DeletesReleasesEveryAddress(t *testing.T) {
	const n = 10000
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	const grace = 3 * time.Second
	s := startStackWith(t, stackOpts{endpoint: srv.Endpoint(), grace: grace, yaml: `
ipamConfig:
  podSubnetCIDR: 10.128.0.0/9
  podSubnetOneNodePrefixLen: 16
  nodeInterconnectCIDR: 192.168.16.0/24
`})
	g.Eventually(s.podSubnet, 10*time.Second).ShouldNot(BeEmpty())
	hb := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	putMarker(t, srv, hb, 0)
	ids := make([]podmodel.ID, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range 16 { // the keeper stores what arrives together in one transaction
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := w; k < n; k += 16 {
				ids[k] = podmodel.ID{Name: fmt.Sprintf("p%d", k), Namespace: "burst"}
				ip, err := s.ipam.AllocatePodIP(ids[k], "", "")
				if err != nil {
					errs <- err
					return
				}
				data, err := codec.Marshal(&podmodel.Pod{Name: ids[k].Name, Namespace: "burst", IpAddress: ip.String()})
				if err == nil {
					_, err = cli.Put(context.Background(), codec.KSRPrefix+podmodel.Key(ids[k].Name, "burst"), string(data))
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		g.Expect(err).NotTo(HaveOccurred())
	}
	held := func() int { return len(ipam.AllocationsOf(s.ipam).Pods) }
	g.Expect(held()).To(Equal(n))
	putMarker(t, srv, hb.Add(time.Second), n) // contiv-ksr's heartbeat after the pods were mirrored
	cands := func() int {
		var c ipam.ReleaseCandidates
		_, body := s.http.Get(ipam.CandidatesPath)
		g.Expect(json.Unmarshal([]byte(body), &c)).To(Succeed())
		return len(c.Candidates)
	}
	start := time.Now()
	_, err := cli.Delete(context.Background(), codec.KSRPrefix+podmodel.KeyPrefix, clientv3.WithPrefix())
	g.Expect(err).NotTo(HaveOccurred())
	putMarker(t, srv, hb.Add(2*time.Second), 0) // its next heartbeat: the mirror holds no pod now
	peak, firstFree := 0, time.Duration(0)
	g.Eventually(func() int {
		c, h := cands(), held()
		peak = max(peak, c)
		if h < n && firstFree == 0 {
			firstFree = time.Since(start)
		}
		return h
	}, burstWait, 500*time.Millisecond).Should(BeZero(), "every deleted pod gave its address back")
	done := time.Since(start)
	g.Expect(firstFree).To(BeNumerically(">=", grace), "nothing is released before a grace period")
	g.Expect(peak).To(BeNumerically(">", 0))
	t.Logf("%d deletes: at most %d release candidates at once; the first address free after %s, all after %s (grace period %s)",
		n, peak, firstFree.Round(time.Millisecond), done.Round(time.Millisecond), grace)
}
