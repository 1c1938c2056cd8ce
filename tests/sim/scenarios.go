package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/contiv-ipam/agent/plugins/controller/api"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// ColdStart is scenario 1's outcome.
type ColdStart struct {
	Nodes int `json:"nodes"`
	// WriteNodesMs is the time contiv-ksr took to write every Node.
	WriteNodesMs float64 `json:"writeNodesMs"`
	// AllReadyMs is the time from the start of the first agent (every
	// one at once, or at Config.StartRate) until every node was ready (a node ID and a pod subnet); PerNode are the
	// nodes' own times to ready.
	AllReadyMs float64 `json:"allReadyMs"`
	PerNode    Dist    `json:"perNode"`
	// Restarts counts nodes restarted after their loop stopped by a
	// fatal error (Config.RestartDelay).
	Restarts int `json:"restarts"`
	// MaxID is the highest node ID; Duplicates lists IDs held by more
	// than one node (must be empty).
	MaxID      uint32   `json:"maxID"`
	Duplicates []string `json:"duplicates,omitempty"`
	Usage      Usage    `json:"usage"`
}

// RunColdStart writes n Nodes, starts n agents at once and waits (at most
// timeout) until every one is ready.
func RunColdStart(ctx context.Context, s *Sim, n int, timeout time.Duration) (*ColdStart, error) {
	out := &ColdStart{Nodes: n}
	before := s.take(ctx)
	first := len(s.all)
	t0 := time.Now()
	if err := s.putNodes(ctx, first, n, 64); err != nil {
		return nil, err
	}
	out.WriteNodesMs = ms(time.Since(t0))
	t1 := time.Now()
	nodes, err := s.startNodes(first, n)
	if err != nil {
		return nil, fmt.Errorf("cold start: %d of %d nodes did not start: %w", n-len(nodes), n, err)
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	_, out.Restarts, err = s.WaitReady(wctx, nodes)
	cancel()
	out.AllReadyMs = ms(time.Since(t1))
	if err != nil {
		return nil, fmt.Errorf("cold start of %d nodes: %w", n, err)
	}
	var per []time.Duration
	for _, nd := range nodes {
		per = append(per, nd.ReadyAfter())
	}
	out.PerNode = dist(per)
	out.MaxID, out.Duplicates = checkIDs(s.Live())
	out.Usage = usage(before, s.take(ctx), len(nodes))
	return out, nil
}

// checkIDs returns the highest node ID of nodes and the IDs held twice
// (or 0, no ID), each with the names holding it.
func checkIDs(nodes []*Node) (uint32, []string) {
	by := make(map[uint32][]string)
	var top uint32
	for _, n := range nodes {
		id := n.ID()
		by[id] = append(by[id], n.Name)
		top = max(top, id)
	}
	var dups []string
	for id, names := range by {
		if len(names) > 1 || id == 0 {
			dups = append(dups, fmt.Sprintf("id %d: %v", id, names))
		}
	}
	slices.Sort(dups)
	return top, dups
}

// Idle is the cost of the running nodes doing nothing for d: leases,
// probes, the marker heartbeat.
func RunIdle(ctx context.Context, s *Sim, d time.Duration) (Usage, error) {
	before := s.take(ctx)
	select {
	case <-time.After(d):
	case <-ctx.Done():
		return Usage{}, ctx.Err()
	}
	return usage(before, s.take(ctx), len(s.Live())), nil
}

// ChurnConfig is scenario 2's load.
type ChurnConfig struct {
	// Ops is how many pod creations and deletions run; Rate their pace
	// (per second, 0: as fast as the workers go); Workers how many run at
	// a time.
	Ops     int
	Rate    float64
	Workers int
	// PodsPerNode is the population churn aims at: below it an op
	// creates a pod, above it deletes one, around it either.
	PodsPerNode int
	// SeenTimeout bounds the wait for a node to handle one pod change
	// (default 60s); a change not seen by then is counted Lost.
	SeenTimeout time.Duration
}

// Churn is scenario 2's outcome.
type Churn struct {
	Creates int `json:"creates"`
	Deletes int `json:"deletes"`
	Failed  int `json:"failed"` // ops that failed (errors in Errors)
	// Latency is from the etcd write (just before the Put that
	// succeeded) to the KubeStateChange handled by the node's loop (after
	// IPAM). Write is contiv-ksr's side: from the first attempt of a
	// write until etcd acknowledged it (with the retries while etcd has
	// no leader).
	Latency Dist `json:"latency"`
	Write   Dist `json:"write"`
	Lost    int  `json:"lost"` // changes not seen within SeenTimeout
	// Problems are broken invariants: a pod change seen by another node,
	// a node's count of pod changes off its writes, an allocation that
	// does not match the pods contiv-ksr holds (must be empty).
	Problems []string `json:"problems,omitempty"`
	Errors   []string `json:"errors,omitempty"`
	Usage    Usage    `json:"usage"`
}

// simPod is a pod the churn created, with its CNI attachment.
type simPod struct {
	Pod
	node *Node
	key  podmanager.AttachmentKey
}

// churner runs one churn: its pods, counts and samples, under mu.
type churner struct {
	s   *Sim
	cfg ChurnConfig

	mu       sync.Mutex
	rng      *rand.Rand
	live     map[*Node][]*simPod
	count    int
	gone     []*simPod
	writes   map[*Node]int64 // pod writes under each node's prefix
	lat      []time.Duration
	put      []time.Duration
	lost     int
	creates  int
	deletes  int
	failed   int
	errs     []string
	serial   atomic.Int64
	nodesNow []*Node
}

// RunChurn runs cfg's pod creations and deletions over the live nodes
// and checks the invariants afterwards (Churn.Problems).
func RunChurn(ctx context.Context, s *Sim, cfg ChurnConfig) (*Churn, error) {
	if cfg.Workers <= 0 {
		cfg.Workers = 16
	}
	if cfg.SeenTimeout == 0 {
		cfg.SeenTimeout = time.Minute
	}
	nodes := s.Live()
	if len(nodes) == 0 {
		return nil, errors.New("churn: no node runs")
	}
	c := &churner{s: s, cfg: cfg, rng: rand.New(rand.NewPCG(s.cfg.Seed, 7)), live: make(map[*Node][]*simPod),
		writes: make(map[*Node]int64), nodesNow: nodes}
	own0 := make(map[*Node]int64, len(nodes))
	for _, n := range nodes {
		own0[n], _ = n.PodChanges()
	}
	before := s.take(ctx)
	c.run(ctx)
	out := &Churn{Creates: c.creates, Deletes: c.deletes, Failed: c.failed, Latency: dist(c.lat), Write: dist(c.put),
		Lost: c.lost, Errors: c.errs}
	out.Problems = c.check(own0)
	out.Usage = usage(before, s.take(ctx), len(nodes))
	// The churn's pods stay; the next churn starts from its own.
	return out, ctx.Err()
}

// run paces the ops and lets the workers take them.
func (c *churner) run(ctx context.Context) {
	ops := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < c.cfg.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range ops {
				c.op(ctx)
			}
		}()
	}
	var tick <-chan time.Time
	if c.cfg.Rate > 0 {
		t := time.NewTicker(time.Duration(float64(time.Second) / c.cfg.Rate))
		defer t.Stop()
		tick = t.C
	}
	for i := 0; i < c.cfg.Ops && ctx.Err() == nil; i++ {
		if tick != nil {
			select {
			case <-tick:
			case <-ctx.Done():
			}
		}
		select {
		case ops <- struct{}{}:
		case <-ctx.Done():
		}
	}
	close(ops)
	wg.Wait()
}

// op creates or deletes one pod.
func (c *churner) op(ctx context.Context) {
	c.mu.Lock()
	target := c.cfg.PodsPerNode * len(c.nodesNow)
	create := c.count < target/2 || (c.count < target*3/2 && c.rng.IntN(2) == 0)
	var p *simPod
	if !create {
		// Every pod may be in flight (being created or deleted): then
		// this op creates one.
		if p = c.takeLive(); p == nil {
			create = true
		}
	}
	if create {
		n := c.nodesNow[c.rng.IntN(len(c.nodesNow))]
		id := c.serial.Add(1)
		name := "pod-" + strconv.FormatInt(id, 10)
		p = &simPod{Pod: Pod{Node: n.Name, Name: name, Namespace: "sim", UID: fmt.Sprintf("uid-%d", id),
			HostIP: NodeIP(n.Index)}, node: n,
			key: podmanager.AttachmentKey{Network: "default", ContainerID: "c-" + name, IfName: "eth0"}}
		c.count++
	}
	c.mu.Unlock()
	var err error
	if create {
		err = c.create(ctx, p)
	} else {
		err = c.delete(ctx, p)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err != nil:
		c.failed++
		if len(c.errs) < 20 {
			c.errs = append(c.errs, err.Error())
		}
	case create:
		c.creates++
	default:
		c.deletes++
	}
	if create && err == nil {
		c.live[p.node] = append(c.live[p.node], p)
	}
	if !create {
		c.count--
		c.gone = append(c.gone, p)
	}
	if create && err != nil {
		c.count--
	}
}

// takeLive removes and returns a random live pod, nil when none is
// (every pod in flight); c.mu is held.
func (c *churner) takeLive() *simPod {
	var withPods []*Node
	for _, n := range c.nodesNow {
		if len(c.live[n]) > 0 {
			withPods = append(withPods, n)
		}
	}
	if len(withPods) == 0 {
		return nil
	}
	n := withPods[c.rng.IntN(len(withPods))]
	list := c.live[n]
	i := c.rng.IntN(len(list))
	p := list[i]
	c.live[n] = slices.Delete(list, i, i+1)
	return p
}

// create is a pod's start as the cluster sees it: contiv-ksr writes the
// scheduled pod, the kubelet's CNI ADD reaches the node's IPAM (AddPod
// in the loop, as podmanager pushes it), contiv-ksr writes the pod again
// with its address.
func (c *churner) create(ctx context.Context, p *simPod) error {
	if err := c.write(ctx, p, func(ctx context.Context) error { return c.s.KSR.PutPod(ctx, &p.Pod, true) }); err != nil {
		return err
	}
	ev := podmanager.NewAddPod()
	ev.Pod = podmodel.ID{Name: p.Name, Namespace: p.Namespace}
	ev.PodUID, ev.Key, ev.NetworkNamespace = p.UID, p.key, "/var/run/netns/"+p.Name
	if err := pushAndWait(ctx, p.node, ev, func(ctx context.Context) error { return ev.Wait(ctx) }); err != nil {
		return fmt.Errorf("CNI ADD %s on %s: %w", p.Name, p.Node, err)
	}
	if len(ev.Interfaces) != 1 || len(ev.Interfaces[0].IPAddresses) != 1 {
		return fmt.Errorf("CNI ADD %s on %s: want one address, got %+v", p.Name, p.Node, ev.Interfaces)
	}
	p.IP = ev.Interfaces[0].IPAddresses[0].Address.Addr()
	return c.write(ctx, p, func(ctx context.Context) error { return c.s.KSR.PutPod(ctx, &p.Pod, false) })
}

// delete is a pod's end: the CNI DEL, then contiv-ksr deletes the pod.
func (c *churner) delete(ctx context.Context, p *simPod) error {
	ev := podmanager.NewDeletePod()
	ev.Pod = podmodel.ID{Name: p.Name, Namespace: p.Namespace}
	ev.Key, ev.NetworkNamespace = p.key, "/var/run/netns/"+p.Name
	if err := pushAndWait(ctx, p.node, ev, func(ctx context.Context) error { return ev.Wait(ctx) }); err != nil {
		return fmt.Errorf("CNI DEL %s on %s: %w", p.Name, p.Node, err)
	}
	return c.write(ctx, p, func(ctx context.Context) error { return c.s.KSR.DeletePod(ctx, &p.Pod) })
}

// pushAndWait pushes a blocking event into the node's loop and waits for
// its durable writes, as podmanager does for a CNI call.
// PushEvent of a blocking event returns once the loop processed it.
func pushAndWait(ctx context.Context, n *Node, ev api.Event, wait func(context.Context) error) error {
	if err := n.ctrl.PushEvent(ev); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return wait(ctx)
}

// write runs one contiv-ksr write of p (retried while etcd does not
// answer, as contiv-ksr retries) and waits until p's node handled it.
func (c *churner) write(ctx context.Context, p *simPod, put func(context.Context) error) error {
	rel := p.RelKey()
	seen := c.s.expect(p.node, rel)
	var err error
	var at time.Time // the start of the attempt that succeeded
	first := time.Now()
	for attempt := 0; ; attempt++ {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		at = time.Now()
		err = put(wctx)
		cancel()
		if err == nil || ctx.Err() != nil || attempt == 20 {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if err != nil {
		c.s.forget(rel)
		return err
	}
	c.mu.Lock()
	c.writes[p.node]++
	c.put = append(c.put, time.Since(first))
	c.mu.Unlock()
	t := time.NewTimer(c.cfg.SeenTimeout)
	defer t.Stop()
	select {
	case when := <-seen:
		c.mu.Lock()
		c.lat = append(c.lat, when.Sub(at))
		c.mu.Unlock()
	case <-t.C:
		c.s.forget(rel)
		c.mu.Lock()
		c.lost++
		c.mu.Unlock()
	case <-ctx.Done():
		c.s.forget(rel)
	}
	return nil
}

// check compares what the nodes saw and hold with what the churn did.
func (c *churner) check(own0 map[*Node]int64) []string {
	var probs []string
	add := func(format string, args ...any) {
		if len(probs) < 50 {
			probs = append(probs, fmt.Sprintf(format, args...))
		}
	}
	for _, n := range c.nodesNow {
		own, foreign := n.PodChanges()
		if foreign != 0 {
			add("%s handled %d pod changes of other nodes", n.Name, foreign)
		}
		if got, want := own-own0[n], c.writes[n]; got != want {
			add("%s handled %d pod changes, contiv-ksr wrote %d under its prefix", n.Name, got, want)
		}
		subnet := n.IPAM().PodSubnetThisNode()
		seen := make(map[netip.Addr]string)
		for _, p := range c.live[n] {
			got, ok, err := n.IPAM().AttachmentIPs(p.key)
			switch {
			case err != nil || !ok || len(got) != 1:
				add("%s: live pod %s: attachment %v, %v, %v", n.Name, p.Name, got, ok, err)
			case got[0].Addr() != p.IP:
				add("%s: live pod %s: IPAM holds %s, contiv-ksr has %s", n.Name, p.Name, got[0].Addr(), p.IP)
			case subnet == nil || !subnet.Contains(p.IP.AsSlice()):
				add("%s: live pod %s: %s outside the node's subnet %v", n.Name, p.Name, p.IP, subnet)
			case seen[p.IP] != "":
				add("%s: %s held by pods %s and %s", n.Name, p.IP, seen[p.IP], p.Name)
			}
			seen[p.IP] = p.Name
		}
	}
	for _, p := range c.gone {
		if got, ok, _ := p.node.IPAM().AttachmentIPs(p.key); ok {
			add("%s: deleted pod %s still holds %v", p.Node, p.Name, got)
		}
	}
	return probs
}

// ReplaceConfig is scenario 3: PerMinute of the nodes (0.01: 1 %) are
// replaced every minute for Duration, at least one.
type ReplaceConfig struct {
	PerMinute float64
	Duration  time.Duration
	// ReadyTimeout bounds the wait for one new node (default 2m).
	ReadyTimeout time.Duration
}

// Replace is scenario 3's outcome.
type Replace struct {
	Replaced int `json:"replaced"`
	Restarts int `json:"restarts"` // of new nodes whose loop died
	// Ready are the new nodes' times to ready, from their start.
	Ready      Dist     `json:"ready"`
	MaxID      uint32   `json:"maxID"`
	Duplicates []string `json:"duplicates,omitempty"`
	Errors     []string `json:"errors,omitempty"`
	Usage      Usage    `json:"usage"`
}

// RunReplace stops a random node (contiv-ksr deletes its Node and pods)
// and starts a new one under a new name, at the pace of cfg.
func RunReplace(ctx context.Context, s *Sim, cfg ReplaceConfig) (*Replace, error) {
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = 2 * time.Minute
	}
	n := len(s.Live())
	if n < 2 {
		return nil, errors.New("replace: fewer than 2 nodes run")
	}
	perMinute := max(cfg.PerMinute*float64(n), 1e-9)
	every := time.Duration(float64(time.Minute) / perMinute)
	count := max(int(cfg.Duration/every), 1)
	out := &Replace{}
	before := s.take(ctx)
	var ready []time.Duration
	next := time.Now()
	for i := 0; i < count && ctx.Err() == nil; i++ {
		select {
		case <-time.After(time.Until(next)):
		case <-ctx.Done():
		}
		next = next.Add(every)
		live := s.Live()
		victim := pick(s, live)
		if err := s.StopNode(ctx, victim); err != nil {
			out.Errors = append(out.Errors, err.Error())
		}
		added, err := s.AddNodes(ctx, 1, 1)
		if err != nil {
			out.Errors = append(out.Errors, err.Error())
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, cfg.ReadyTimeout)
		var restarts int
		_, restarts, err = s.WaitReady(wctx, added)
		cancel()
		out.Restarts += restarts
		if err != nil {
			out.Errors = append(out.Errors, fmt.Sprintf("%s: %v", added[0].Name, err))
			continue
		}
		out.Replaced++
		ready = append(ready, added[0].ReadyAfter())
	}
	out.Ready = dist(ready)
	out.MaxID, out.Duplicates = checkIDs(s.Live())
	out.Usage = usage(before, s.take(ctx), len(s.Live()))
	return out, ctx.Err()
}

// KillConfig is scenario 4: the leader member is killed (SIGKILL) while
// Churn runs, restarted Down later.
type KillConfig struct {
	Down  time.Duration
	Churn ChurnConfig
	// KillAfter is when the kill comes after the churn started.
	KillAfter time.Duration
}

// Kill is scenario 4's outcome.
type Kill struct {
	Member string `json:"member"`
	// RestartMs is the time from the restart until the member answered.
	RestartMs float64 `json:"restartMs"`
	Churn     *Churn  `json:"churn"`
	// NotReady are the nodes not ready after the churn; IDChanged those
	// whose node ID changed (both must be empty).
	NotReady  []string `json:"notReady,omitempty"`
	Restarts  int      `json:"restarts"` // nodes whose loop died, restarted
	IDChanged []string `json:"idChanged,omitempty"`
}

// RunKill kills the leader member during a churn and restarts it.
func RunKill(ctx context.Context, s *Sim, cfg KillConfig) (*Kill, error) {
	nodes := s.Live()
	ids := make(map[string]uint32, len(nodes))
	for _, n := range nodes {
		ids[n.Name] = n.ID()
	}
	m, err := s.leader(ctx)
	if err != nil {
		return nil, err
	}
	out := &Kill{Member: m.Name}
	var churn *Churn
	var churnErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		churn, churnErr = RunChurn(ctx, s, cfg.Churn)
	}()
	select {
	case <-time.After(cfg.KillAfter):
	case <-done:
	}
	m.Kill()
	select {
	case <-time.After(cfg.Down):
	case <-ctx.Done():
	}
	t := time.Now()
	err = s.Etcd.Restart(ctx, m)
	out.RestartMs = ms(time.Since(t))
	<-done
	if err = errors.Join(err, churnErr); err != nil {
		return nil, err
	}
	out.Churn = churn
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	_, out.Restarts, _ = s.WaitReady(wctx, nodes)
	cancel()
	for _, n := range nodes {
		if !n.Ready() {
			out.NotReady = append(out.NotReady, n.Name)
		}
		if id := n.ID(); id != ids[n.Name] {
			out.IDChanged = append(out.IDChanged, fmt.Sprintf("%s: %d -> %d", n.Name, ids[n.Name], id))
		}
	}
	return out, nil
}

// leader is the member that leads the cluster now.
func (s *Sim) leader(ctx context.Context) (*Member, error) {
	cli := s.KSR.cli
	for _, m := range s.Etcd.Members {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := cli.Status(sctx, m.Endpoint())
		cancel()
		if err != nil {
			continue
		}
		if st.Header.MemberId == st.Leader {
			return m, nil
		}
	}
	return nil, errors.New("no etcd member says it leads")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
