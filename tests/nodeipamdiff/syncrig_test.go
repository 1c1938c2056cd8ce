package nodeipamdiff

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/nodeipam/ipam/cidrset"
	nodesync "k8s.io/kubernetes/pkg/controller/nodeipam/ipam/sync"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/contiv-ipam/agent/plugins/nodeipam"
)

// TestMain silences klog: Kubernetes' sync loop logs its errors through
// the global klog logger (its runs use context.Background()).
func TestMain(m *testing.M) {
	klog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

// The observable actions of a sync run, in the order they happen, as
// "<kind> <node> <value>"; a call that failed ends in " !".
const (
	actPatch = "patch" // the Node's pod CIDR set
	actAlias = "alias" // the node's cloud range set ("alias n" alone: removed)
	actCond  = "cond"  // a node condition set (Kubernetes: NetworkUnavailable=False)
)

// faults are the calls a step makes fail: every call of that kind fails
// while the step runs.
type faults struct {
	get, set, patch, cond bool
}

var errInjected = errors.New("injected fault")

// outcome is what one side did in one step.
type outcome struct {
	actions  []string // patches, alias writes, conditions, in order
	warnings []string // the reasons of the Warning events
	err      error    // the run's result (ReportResult / WithSyncReport)
}

// syncSide is one implementation of the node sync loop, single-stack,
// driven one operation at a time: each call returns once the node's run
// has reported its result.
type syncSide interface {
	// add creates the node (with cidr as its pod CIDR, "" for none) and
	// hands it to its loop.
	add(t testing.TB, name, cidr string, f faults) outcome
	// resync hands the node as it is to its loop again.
	resync(t testing.TB, name string, f faults) outcome
	// del deletes the node and hands it to its loop, which ends.
	del(t testing.TB, name string) outcome
	// setAlias sets (cidr "": removes) the node's cloud range behind the
	// loop's back, as the cloud or an operator would.
	setAlias(t testing.TB, name, cidr string)
	// podCIDR and alias read the state.
	podCIDR(t testing.TB, name string) string
	alias(name string) string
}

// ---- Kubernetes' NodeSync, through fakes of its three interfaces ----

// k8sSync runs one k8s.io/kubernetes/pkg/controller/nodeipam/ipam/sync
// NodeSync per node on one cidrset, with fakes of its cloudAlias,
// kubeAPI and controller interfaces. ResyncTimeout is an hour: every run
// is one the test asks for.
type k8sSync struct {
	mode    nodesync.NodeSyncMode
	set     *cidrset.CidrSet
	loops   map[string]*k8sLoop
	reports chan error

	mu      sync.Mutex // guards what follows (the loops run the fakes)
	nodes   map[string]*v1.Node
	aliases map[string]*net.IPNet
	faults  faults
	log     outcome
}

type k8sLoop struct {
	ns   *nodesync.NodeSync
	done chan struct{}
}

func newK8sSync(t testing.TB, mode nodesync.NodeSyncMode, cluster string, mask int) *k8sSync {
	t.Helper()
	set, err := cidrset.NewCIDRSet(mustIPNet(cluster), mask)
	if err != nil {
		t.Fatalf("k8s cidrset %s /%d: %v", cluster, mask, err)
	}
	k := &k8sSync{mode: mode, set: set, loops: make(map[string]*k8sLoop), reports: make(chan error, 100),
		nodes: make(map[string]*v1.Node), aliases: make(map[string]*net.IPNet)}
	t.Cleanup(func() {
		for name, l := range k.loops {
			l.ns.Delete(k.node(name))
			<-k.reports
			<-l.done
		}
	})
	return k
}

// The controller interface.
func (k *k8sSync) ReportResult(err error)       { k.reports <- err }
func (k *k8sSync) ResyncTimeout() time.Duration { return time.Hour }

// The cloudAlias interface.
func (k *k8sSync) Alias(_ context.Context, node *v1.Node) (*net.IPNet, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.faults.get {
		return nil, errInjected
	}
	return k.aliases[node.Name], nil
}

func (k *k8sSync) AddAlias(_ context.Context, node *v1.Node, r *net.IPNet) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.faults.set {
		k.log.actions = append(k.log.actions, fmt.Sprintf("%s %s %s !", actAlias, node.Name, r))
		return errInjected
	}
	k.log.actions = append(k.log.actions, fmt.Sprintf("%s %s %s", actAlias, node.Name, r))
	k.aliases[node.Name] = r
	return nil
}

// The kubeAPI interface.
func (k *k8sSync) Node(_ context.Context, name string) (*v1.Node, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	n, ok := k.nodes[name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, name)
	}
	return n.DeepCopy(), nil
}

func (k *k8sSync) UpdateNodePodCIDR(_ context.Context, node *v1.Node, r *net.IPNet) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.faults.patch {
		k.log.actions = append(k.log.actions, fmt.Sprintf("%s %s %s !", actPatch, node.Name, r))
		return errInjected
	}
	k.log.actions = append(k.log.actions, fmt.Sprintf("%s %s %s", actPatch, node.Name, r))
	if n, ok := k.nodes[node.Name]; ok {
		n.Spec.PodCIDR = r.String()
		n.Spec.PodCIDRs = []string{r.String()}
	}
	return nil
}

func (k *k8sSync) UpdateNodeNetworkUnavailable(name string, unavailable bool) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	a := fmt.Sprintf("%s %s NetworkUnavailable=%t", actCond, name, unavailable)
	if k.faults.cond {
		k.log.actions = append(k.log.actions, a+" !")
		return errInjected
	}
	k.log.actions = append(k.log.actions, a)
	return nil
}

func (k *k8sSync) EmitNodeWarningEvent(_, reason, _ string, _ ...interface{}) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.log.warnings = append(k.log.warnings, reason)
}

func (k *k8sSync) node(name string) *v1.Node {
	n, err := k.Node(context.Background(), name)
	if err != nil {
		return newNode(name)
	}
	return n
}

// run applies f, calls op and returns what happened once the loop has
// reported.
func (k *k8sSync) run(t testing.TB, f faults, op func()) outcome {
	t.Helper()
	k.mu.Lock()
	k.faults, k.log = f, outcome{}
	k.mu.Unlock()
	op()
	select {
	case err := <-k.reports:
		k.mu.Lock()
		defer k.mu.Unlock()
		k.faults = faults{}
		out := k.log
		out.err = err
		return out
	case <-time.After(10 * time.Second):
		t.Fatalf("k8s: no report from the sync loop")
		return outcome{}
	}
}

func (k *k8sSync) loop(name string) *k8sLoop {
	if l := k.loops[name]; l != nil {
		return l
	}
	l := &k8sLoop{ns: nodesync.New(k, k, k, k.mode, name, k.set), done: make(chan struct{})}
	go l.ns.Loop(logr.Discard(), l.done)
	k.loops[name] = l
	return l
}

func (k *k8sSync) add(t testing.TB, name, cidr string, f faults) outcome {
	t.Helper()
	n := newNode(name)
	if cidr != "" {
		n = newNode(name, cidr)
	}
	k.mu.Lock()
	k.nodes[name] = n
	k.mu.Unlock()
	return k.run(t, f, func() { k.loop(name).ns.Update(k.node(name)) })
}

// resync asks for the run the loop's timer makes: Update(nil), which
// reads the node through kubeAPI.Node.
func (k *k8sSync) resync(t testing.TB, name string, f faults) outcome {
	t.Helper()
	return k.run(t, f, func() { k.loop(name).ns.Update(nil) })
}

func (k *k8sSync) del(t testing.TB, name string) outcome {
	t.Helper()
	n := k.node(name)
	k.mu.Lock()
	delete(k.nodes, name)
	k.mu.Unlock()
	l := k.loop(name)
	delete(k.loops, name)
	out := k.run(t, faults{}, func() { l.ns.Delete(n) })
	<-l.done
	return out
}

func (k *k8sSync) setAlias(t testing.TB, name, cidr string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if cidr == "" {
		delete(k.aliases, name)
		return
	}
	k.aliases[name] = mustIPNet(cidr)
}

func (k *k8sSync) podCIDR(_ testing.TB, name string) string { return k.node(name).Spec.PodCIDR }

func (k *k8sSync) alias(name string) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if a := k.aliases[name]; a != nil {
		return a.String()
	}
	return ""
}

// ---- ours: nodeipam.IPAMController ----

// oursSync is nodeipam.IPAMController (IPAMFromCluster or IPAMFromCloud)
// on a fake clientset, a recording Cloud and a fake clock that never
// moves: every run is one the test asks for, and WithSyncReport says
// when it is over.
type oursSync struct {
	client  *fake.Clientset
	ctrl    *nodeipam.IPAMController
	events  *record.FakeRecorder
	cloud   *recCloud
	reports chan error

	mu     sync.Mutex // guards what follows (the reactor runs in the loops)
	faults faults
	log    []string
}

// recCloud is a nodeipam.Cloud that records its writes and fails on
// request.
type recCloud struct {
	o      *oursSync
	mu     sync.Mutex
	ranges map[string][]netip.Prefix
}

func (c *recCloud) NodeRanges(_ context.Context, node string) ([]netip.Prefix, error) {
	c.o.mu.Lock()
	get := c.o.faults.get
	c.o.mu.Unlock()
	if get {
		return nil, errInjected
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.ranges[node]), nil
}

func (c *recCloud) SetNodeRanges(_ context.Context, node string, ranges []netip.Prefix) error {
	a := fmt.Sprintf("%s %s", actAlias, node)
	for _, r := range ranges {
		a += " " + r.String()
	}
	c.o.mu.Lock()
	fail := c.o.faults.set
	if fail {
		a += " !"
	}
	c.o.log = append(c.o.log, a)
	c.o.mu.Unlock()
	if fail {
		return errInjected
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(ranges) == 0 {
		delete(c.ranges, node)
	} else {
		c.ranges[node] = slices.Clone(ranges)
	}
	return nil
}

func newOursSync(t testing.TB, mode nodeipam.SyncMode, cluster string, mask int) *oursSync {
	t.Helper()
	o := &oursSync{client: fake.NewSimpleClientset(), events: record.NewFakeRecorder(1000), reports: make(chan error, 100)}
	o.cloud = &recCloud{o: o, ranges: make(map[string][]netip.Prefix)}
	o.client.PrependReactor("patch", "nodes", o.react)
	factory := informers.NewSharedInformerFactory(o.client, 0) // never started: the test hands the nodes in
	cfg := nodeipam.DefaultConfig()
	cfg.Enabled = true
	cfg.AllocatorType = nodeipam.IPAMFromCloudAllocatorType
	if mode == nodeipam.SyncFromCluster {
		cfg.AllocatorType = nodeipam.IPAMFromClusterAllocatorType
	}
	cfg.ClusterCIDRs = []string{cluster}
	if netip.MustParsePrefix(cluster).Addr().Is4() {
		cfg.NodeCIDRMaskSizeIPv4 = mask
	} else {
		cfg.NodeCIDRMaskSizeIPv6 = mask
	}
	ctx := quiet(t)
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ctrl, err := nodeipam.NewIPAMController(ctx, nodeipam.Params{
		Client: o.client, Nodes: factory.Core().V1().Nodes(), Config: cfg, Cloud: o.cloud, Recorder: o.events,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, mode, &v1.NodeList{}, nodeipam.WithClock(clk), nodeipam.WithSyncReport(func(_ string, err error) { o.reports <- err }))
	if err != nil {
		t.Fatalf("ours: %v", err)
	}
	o.ctrl = ctrl
	stop, ended := make(chan struct{}), make(chan struct{})
	go func() { defer close(ended); ctrl.Run(stop) }()
	t.Cleanup(func() { close(stop); <-ended })
	return o
}

// react records the node patches (spec: the pod CIDRs; status: a
// condition) and fails them on request.
func (o *oursSync) react(a k8stesting.Action) (bool, runtime.Object, error) {
	p, ok := a.(k8stesting.PatchAction)
	if !ok {
		return false, nil, nil
	}
	var body struct {
		Spec struct {
			PodCIDR string `json:"podCIDR"`
		} `json:"spec"`
		Status struct {
			Conditions []v1.NodeCondition `json:"conditions"`
		} `json:"status"`
	}
	_ = json.Unmarshal(p.GetPatch(), &body)
	o.mu.Lock()
	defer o.mu.Unlock()
	var s string
	fail := o.faults.patch
	if p.GetSubresource() == "status" {
		fail = o.faults.cond
		for _, c := range body.Status.Conditions {
			s += fmt.Sprintf("%s %s %s=%s", actCond, p.GetName(), c.Type, c.Status)
		}
	} else {
		s = fmt.Sprintf("%s %s %s", actPatch, p.GetName(), body.Spec.PodCIDR)
	}
	if fail {
		o.log = append(o.log, s+" !")
		return true, nil, errInjected
	}
	o.log = append(o.log, s)
	return false, nil, nil
}

func (o *oursSync) run(t testing.TB, f faults, op func() error) outcome {
	t.Helper()
	o.mu.Lock()
	o.faults, o.log = f, nil
	o.mu.Unlock()
	if err := op(); err != nil {
		t.Fatalf("ours: %v", err)
	}
	select {
	case err := <-o.reports:
		o.mu.Lock()
		defer o.mu.Unlock()
		o.faults = faults{}
		return outcome{actions: o.log, warnings: (&side{events: o.events}).warnings(), err: err}
	case <-time.After(10 * time.Second):
		t.Fatalf("ours: no report from the sync loop")
		return outcome{}
	}
}

func (o *oursSync) get(t testing.TB, name string) *v1.Node {
	t.Helper()
	n, err := o.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("ours: get node %s: %v", name, err)
	}
	return n
}

func (o *oursSync) add(t testing.TB, name, cidr string, f faults) outcome {
	t.Helper()
	n := newNode(name)
	if cidr != "" {
		n = newNode(name, cidr)
	}
	if _, err := o.client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		t.Fatalf("ours: create node %s: %v", name, err)
	}
	return o.resync(t, name, f)
}

func (o *oursSync) resync(t testing.TB, name string, f faults) outcome {
	t.Helper()
	n := o.get(t, name)
	return o.run(t, f, func() error { return o.ctrl.AllocateOrOccupyCIDR(context.Background(), n) })
}

func (o *oursSync) del(t testing.TB, name string) outcome {
	t.Helper()
	n := o.get(t, name)
	if err := o.client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("ours: delete node %s: %v", name, err)
	}
	return o.run(t, faults{}, func() error { return o.ctrl.ReleaseCIDR(context.Background(), n) })
}

func (o *oursSync) setAlias(t testing.TB, name, cidr string) {
	o.cloud.mu.Lock()
	defer o.cloud.mu.Unlock()
	if cidr == "" {
		delete(o.cloud.ranges, name)
		return
	}
	o.cloud.ranges[name] = []netip.Prefix{netip.MustParsePrefix(cidr).Masked()}
}

func (o *oursSync) podCIDR(t testing.TB, name string) string { return o.get(t, name).Spec.PodCIDR }

func (o *oursSync) alias(name string) string {
	o.cloud.mu.Lock()
	defer o.cloud.mu.Unlock()
	var s []string
	for _, r := range o.cloud.ranges[name] {
		s = append(s, r.String())
	}
	return strings.Join(s, ",")
}

// bothSync builds the two sides for one mode.
func bothSync(t testing.TB, mode nodeipam.SyncMode, cluster string, mask int) (*k8sSync, *oursSync) {
	t.Helper()
	return newK8sSync(t, nodesync.NodeSyncMode(mode), cluster, mask), newOursSync(t, mode, cluster, mask)
}

var (
	_ syncSide = (*k8sSync)(nil)
	_ syncSide = (*oursSync)(nil)
)
