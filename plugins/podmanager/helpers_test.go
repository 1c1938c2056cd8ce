package podmanager_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/contiv-ipam/agent/infra/agent"
	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/health/healthtest"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/plugins/controller"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/podmanager"
	"github.com/contiv-ipam/agent/plugins/podmanager/cni"
)

// podSubnet is the fake IPAM's subnet; .1 is the gateway.
var (
	podSubnet = netip.MustParsePrefix("10.1.5.0/24")
	gateway   = netip.MustParseAddr("10.1.5.1")
)

// fakeIPAM is the IPAM event handler of the tests (registered after
// podmanager, as in the agent) and its podmanager.IPAM: it allocates from
// podSubnet, records every call, Awaits the pendings the test controls and
// fails on demand. Safe for concurrent use: the loop calls the handler,
// the test and the server read.
type fakeIPAM struct {
	mu       sync.Mutex
	seen     []string // "add <key>", "delete <key>", "revert <key>", "gc <network>"
	held     map[podmanager.AttachmentKey]netip.Prefix
	next     netip.Addr
	failAdd  error              // Update(AddPod) fails with it
	failDel  error              // Update(DeletePod) fails with it
	pending  podmanager.Pending // Awaited by every AddPod, DeletePod, GCPods
	freeErr  error              // FreeAddresses fails with it
	free     *uint64            // FreeAddresses' answer; nil: the unallocated count
	onUpdate func(ev api.Event) // called first in every Update
	ipErr    error              // AttachmentIPs fails with it

	// Reservations: every AddPod whose client Confirms gets a new one
	// ("res-<n>") when reserve is set, as long as the key is not
	// confirmed; ConfirmAttachment confirms the key's current one.
	reserve    bool
	serial     int
	reserved   map[podmanager.AttachmentKey]string // the key's unconfirmed reservation
	confirmed  map[podmanager.AttachmentKey]bool
	confirmErr error                           // ConfirmAttachment fails with it
	onConfirm  func(ctx context.Context) error // called first in every ConfirmAttachment, without the lock
}

var (
	_ api.EventHandler = (*fakeIPAM)(nil)
	_ podmanager.IPAM  = (*fakeIPAM)(nil)
)

func newFakeIPAM() *fakeIPAM {
	return &fakeIPAM{
		held: map[podmanager.AttachmentKey]netip.Prefix{}, next: gateway.Next(),
		reserved: map[podmanager.AttachmentKey]string{}, confirmed: map[podmanager.AttachmentKey]bool{},
	}
}

func (f *fakeIPAM) String() string { return "ipam" }

func (f *fakeIPAM) HandlesEvent(ev api.Event) bool {
	switch ev.(type) {
	case *podmanager.AddPod, *podmanager.DeletePod, *podmanager.GCPods:
		return true
	}
	return false
}

func (f *fakeIPAM) Resync(api.Event, api.KubeStateData, int, api.ResyncOperations) error { return nil }

func (f *fakeIPAM) Update(ev api.Event, _ api.UpdateOperations) (string, error) {
	f.mu.Lock()
	hook := f.onUpdate
	f.mu.Unlock()
	if hook != nil {
		hook(ev)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch e := ev.(type) {
	case *podmanager.AddPod:
		f.seen = append(f.seen, "add "+e.Key.String())
		if f.failAdd != nil {
			return "", f.failAdd
		}
		f.fill(e)
		if f.pending != nil {
			e.Await(f.pending)
		}
	case *podmanager.DeletePod:
		f.seen = append(f.seen, "delete "+e.Key.String())
		if f.failDel != nil {
			return "", f.failDel
		}
		f.forget(e.Key)
		if f.pending != nil {
			e.Await(f.pending)
		}
	case *podmanager.GCPods:
		f.seen = append(f.seen, "gc "+e.Network)
		for k := range f.held {
			if k.Network == e.Network && !slices.Contains(e.Valid, k) {
				f.forget(k)
			}
		}
		if f.pending != nil {
			e.Await(f.pending)
		}
	}
	return "", nil
}

// fill allocates (or finds) the key's address and fills the outputs.
func (f *fakeIPAM) fill(e *podmanager.AddPod) {
	addr, ok := f.held[e.Key]
	if !ok {
		addr = netip.PrefixFrom(f.next, podSubnet.Bits())
		f.next = f.next.Next()
		f.held[e.Key] = addr
	}
	e.Interfaces = []podmanager.PodInterface{{
		Name: e.Key.IfName, Sandbox: e.NetworkNamespace,
		IPAddresses: []podmanager.IPWithGateway{{Address: addr, Gateway: gateway}},
	}}
	e.Routes = []podmanager.Route{{Dst: netip.MustParsePrefix("0.0.0.0/0"), Gw: gateway}}
	if f.reserve && e.Confirms && !f.confirmed[e.Key] {
		f.serial++
		e.Reservation = fmt.Sprintf("res-%d", f.serial)
		f.reserved[e.Key] = e.Reservation
	}
}

// forget drops the key's address and reservation.
func (f *fakeIPAM) forget(k podmanager.AttachmentKey) {
	delete(f.held, k)
	delete(f.reserved, k)
	delete(f.confirmed, k)
}

// ConfirmAttachment confirms the key's current reservation; another one
// is an error wrapping ErrBadRequest, as the interface says.
func (f *fakeIPAM) ConfirmAttachment(ctx context.Context, key podmanager.AttachmentKey, reservation string) error {
	f.mu.Lock()
	hook := f.onConfirm
	f.mu.Unlock()
	if hook != nil {
		if err := hook(ctx); err != nil {
			return err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen = append(f.seen, "confirm "+key.String()+" "+reservation)
	if f.confirmErr != nil {
		return f.confirmErr
	}
	if cur, ok := f.reserved[key]; !ok || cur != reservation {
		return fmt.Errorf("reservation %q of %s: the key holds %q: %w", reservation, key, cur, podmanager.ErrBadRequest)
	}
	delete(f.reserved, key)
	f.confirmed[key] = true
	return nil
}

// isConfirmed tells whether the key's reservation was confirmed.
func (f *fakeIPAM) isConfirmed(key podmanager.AttachmentKey) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.confirmed[key]
}

func (f *fakeIPAM) Revert(ev api.Event) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e, ok := ev.(*podmanager.AddPod); ok {
		f.seen = append(f.seen, "revert "+e.Key.String())
		f.forget(e.Key)
	}
	return nil
}

func (f *fakeIPAM) AttachmentIPs(key podmanager.AttachmentKey) ([]netip.Prefix, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ipErr != nil {
		return nil, false, f.ipErr
	}
	p, ok := f.held[key]
	if !ok {
		return nil, false, nil
	}
	return []netip.Prefix{p}, true, nil
}

func (f *fakeIPAM) FreeAddresses() (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.freeErr != nil {
		return 0, f.freeErr
	}
	if f.free != nil {
		return *f.free, nil
	}
	return 253 - uint64(len(f.held)), nil
}

// set changes the fake under its lock.
func (f *fakeIPAM) set(change func(f *fakeIPAM)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(f)
}

// calls returns what the handler saw, in order.
func (f *fakeIPAM) calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.seen)
}

// registry is a metrics.API over a fresh registry.
type registry struct{ reg *prometheus.Registry }

func (r registry) Registerer() prometheus.Registerer     { return r.reg }
func (r registry) Register(c prometheus.Collector) error { return r.reg.Register(c) }

// counter returns the value of the counter name with the labels.
func (r registry) counter(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	return r.metric(t, name, labels).GetCounter().GetValue()
}

// histogramCount returns the sample count of the histogram name with the
// labels.
func (r registry) histogramCount(t *testing.T, name string, labels map[string]string) uint64 {
	t.Helper()
	return r.metric(t, name, labels).GetHistogram().GetSampleCount()
}

// metric returns the metric name whose labels agree with labels, nil
// (whose getters answer zero) when there is none.
func (r registry) metric(t *testing.T, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue metric
				}
			}
			return m
		}
	}
	return nil
}

// gauge returns the value of the unlabelled gauge name.
func (r registry) gauge(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}

// stack is etcd + controller + podmanager + fakeIPAM under one agent.
type stack struct {
	pm      *podmanager.Plugin
	ipam    *fakeIPAM
	witness *fakeWitness
	health  *healthtest.Recorder
	reg     registry
	client  cni.RemoteCNIClient
	socket  string
	stop    func() error
}

// stackOpts change the stack before it starts.
type stackOpts struct {
	conf   podmanager.Config
	noIPAM bool // podmanager gets no podmanager.IPAM (the handler stays)
	// witness: podmanager's IPAM is also a podmanager.RuntimeWitness
	// (stack.witness records what it is told).
	witness bool
	// wrapIPAM, when set, makes podmanager's IPAM what it returns for the
	// fake (a fake with more capabilities).
	wrapIPAM func(*fakeIPAM) podmanager.IPAM
}

// startStack runs the stack with the socket in a fresh temp dir.
func startStack(t *testing.T, change ...func(*stackOpts)) *stack {
	t.Helper()
	o := stackOpts{conf: podmanager.DefaultConfig()}
	o.conf.SocketPath = filepath.Join(t.TempDir(), "run", "cni.sock")
	for _, c := range change {
		c(&o)
	}
	s, err := tryStartStack(t, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// tryStartStack is startStack returning the start error.
func tryStartStack(t *testing.T, o stackOpts) (*stack, error) {
	t.Helper()
	srv := etcdtest.Start(t)
	quiet := slog.New(slog.DiscardHandler)
	s := &stack{ipam: newFakeIPAM(), health: &healthtest.Recorder{}, reg: registry{prometheus.NewRegistry()},
		socket: o.conf.SocketPath}
	ec := etcd.DefaultConfig()
	ec.Endpoints = []string{srv.Endpoint()}
	ec.DialTimeout, ec.OperationTimeout = 3*time.Second, 2*time.Second
	etcdP := etcd.NewPlugin(etcd.UseConf(ec), etcd.UseEnv(func(string) (string, bool) { return "", false }),
		etcd.UseDeps(func(d *etcd.Deps) { d.Cfg, d.Log = config.NoFile, quiet }))
	loop := &controller.LoopRef{}
	s.pm = podmanager.NewPlugin(podmanager.UseConf(o.conf), podmanager.UseDeps(func(d *podmanager.Deps) {
		d.Cfg, d.Log = config.NoFile, testLog(t)
		d.EventLoop, d.IPAM, d.Metrics, d.StatusCheck = loop, s.ipam, s.reg, s.health
		if o.noIPAM {
			d.IPAM = nil
		}
		if o.witness {
			s.witness = &fakeWitness{fakeIPAM: s.ipam, looks: make(chan witnessLook, 100)}
			d.IPAM = s.witness
		}
		if o.wrapIPAM != nil {
			d.IPAM = o.wrapIPAM(s.ipam)
		}
	}))
	ctrl := controller.NewPlugin(controller.UseLoopRef(loop), controller.UseHandlers(s.pm, s.ipam),
		controller.UseDeps(func(d *controller.Deps) {
			d.Cfg, d.Log = config.NoFile, quiet
			d.RemoteDB, d.Metrics = etcdP, s.reg
		}))
	a, err := agent.NewAgent(agent.Plugins(etcdP, s.pm, ctrl), agent.Args(nil), agent.Logger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		return nil, err
	}
	s.stop = a.Stop
	t.Cleanup(func() { _ = a.Stop() })
	conn, err := grpc.NewClient("unix://"+o.conf.SocketPath, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	s.client = cni.NewRemoteCNIClient(conn)
	return s, nil
}

// testLog sends a plugin's logs to the test output.
func testLog(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// ctx bounds one call of a test.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

// addRequest is an ADD of container c for pod default/<pod> (no pod when
// pod is "").
func addRequest(c, pod string) *cni.CNIRequest {
	req := &cni.CNIRequest{
		Version: "1.1.0", ContainerId: c, NetworkNamespace: "/var/run/netns/" + c,
		InterfaceName: "eth0", NetworkName: "k8s-pod-network",
	}
	if pod != "" {
		req.ExtraArguments = fmt.Sprintf("IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=%s;K8S_POD_INFRA_CONTAINER_ID=%s", pod, c)
	}
	return req
}

// keyOf is the attachment key of an addRequest.
func keyOf(c string) podmanager.AttachmentKey {
	return podmanager.AttachmentKey{Network: "k8s-pod-network", ContainerID: c, IfName: "eth0"}
}

// gate is a Pending that blocks until it is opened (or ctx ends), and
// tells when a call waits on it.
type gate struct {
	waiting chan struct{}
	open    chan struct{}
	once    sync.Once
}

func newGate() *gate { return &gate{waiting: make(chan struct{}, 16), open: make(chan struct{})} }

func (g *gate) pending(ctx context.Context) error {
	g.waiting <- struct{}{}
	select {
	case <-g.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gate) release() { g.once.Do(func() { close(g.open) }) }
