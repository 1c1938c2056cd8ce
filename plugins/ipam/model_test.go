package ipam_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ipam"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// The model test: workers allocate (through the pod-ID API or an AddPod
// of the pod's attachment) and release pod addresses while resyncs run
// and the store fails a fraction of the writes the ways a real store
// fails (not applied; unknown but applied; unknown and lost; unknown and
// applied late, after reads ordered behind it; stalled past
// storeTimeout, withdrawing the writes queued behind) and of the
// read-backs. After every round, and
// after a restart on the same bolt file, the invariants must hold:
//   - no address is held by two pods (in memory, in bolt);
//   - every acknowledged allocation is in bolt and in memory;
//   - bolt holds nothing that memory does not.

const modelConfig = `
ipamConfig:
  podSubnetCIDR: 10.1.0.0/16
  podSubnetOneNodePrefixLen: 26
  nodeInterconnectCIDR: 192.168.16.0/24
`

// modelDualConfig adds an IPv6 family of 60 addresses (a /122).
const modelDualConfig = modelConfig + `
  dualStack:
    podSubnetCIDR: fd00:10:1::/96
    podSubnetOneNodePrefixLen: 122
    vppHostSubnetCIDR: fd00:30::/96
    vppHostSubnetOneNodePrefixLen: 120
    vxlanCIDR: fd00:17::/120
    serviceCIDR: fd00:96::/112
`

const (
	modelWorkers    = 6
	modelPodsEach   = 8 // 48 pods for 60 addresses: exhaustion happens
	modelOpsEach    = 40
	modelRounds     = 8
	modelFaultShare = 0.15
)

// model is what the test knows for sure. Each pod belongs to one worker,
// so the calls for a pod are sequential.
type model struct {
	mu    sync.Mutex
	acked map[podmodel.ID]string   // acknowledged, not released since
	maybe map[podmodel.ID]struct{} // a failed call left the pod unknown
	exist map[podmodel.ID]struct{} // the pods "Kubernetes" has
}

func newModel() *model {
	return &model{acked: map[podmodel.ID]string{}, maybe: map[podmodel.ID]struct{}{}, exist: map[podmodel.ID]struct{}{}}
}

// kube is the Kubernetes state: every pod that exists, with its
// acknowledged address when it has one.
func (m *model) kube() api.KubeStateData {
	m.mu.Lock()
	defer m.mu.Unlock()
	ks := kubePods()
	for id := range m.exist {
		all := strings.Split(m.acked[id], ",")
		ks["pod"][podmodel.Key(id.Name, id.Namespace)] = &podmodel.Pod{Name: id.Name, Namespace: id.Namespace, IpAddress: all[0], IpAddresses: all}
	}
	return ks
}

func (m *model) allocated(id podmodel.ID, ip string, err error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		m.maybe[id] = struct{}{}
		return nil
	}
	_, unsure := m.maybe[id]
	if old, ok := m.acked[id]; ok && old != ip && !unsure {
		return fmt.Errorf("pod %s: acknowledged %s, then %s without a release", id, old, ip)
	}
	m.acked[id] = ip
	delete(m.maybe, id)
	return nil
}

func (m *model) released(id podmodel.ID, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		m.maybe[id] = struct{}{}
		return
	}
	delete(m.acked, id)
	delete(m.maybe, id)
	delete(m.exist, id)
}

func (m *model) create(id podmodel.ID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.exist[id] = struct{}{}
}

func TestModelRandomFaults(t *testing.T) { runModel(t, modelConfig) }

// TestModelRandomFaultsDualStack runs the model on a dual-stack node, with
// CNI ADDs that reserve and confirm: every allocation also holds exactly
// one address of each family, and no address of either family is held
// twice.
func TestModelRandomFaultsDualStack(t *testing.T) { runModel(t, modelDualConfig) }

func runModel(t *testing.T, yaml string) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "bolt.db")
	m := newModel()
	db := openBolt(t, path)
	fdb := newFaultDB(db)
	// A storeTimeout shorter than a stall: the writes queued behind a
	// stalled one are withdrawn.
	f := mustFixture(t, fixtureOpts{db: fdb, yaml: yaml, conf: func(c *ipam.Config) { c.StoreTimeout = stallFor / 2 }}, nil)
	rng := rand.New(rand.NewPCG(seed, 1))
	var rngMu sync.Mutex
	chance := func(p float64) bool {
		rngMu.Lock()
		defer rngMu.Unlock()
		return rng.Float64() < p
	}
	for round := range modelRounds {
		fdb.setDecide(func([]kvdb.Op) fault {
			switch {
			case chance(modelFaultShare / 5):
				return failBefore
			case chance(modelFaultShare / 5):
				return failAfter
			case chance(modelFaultShare / 5):
				return lostUnknown
			case chance(modelFaultShare / 5):
				return lateApply
			case chance(modelFaultShare / 10):
				return stall
			}
			return pass
		})
		fdb.setFailGet(func(string) bool { return chance(modelFaultShare) })
		runModelRound(t, f.ipam, m, seed+uint64(round))
		fdb.setDecide(nil)
		fdb.setFailGet(nil)
		checkModel(g, f.ipam, db, m, fmt.Sprintf("round %d", round))
	}
	f.close(t)
	g.Expect(db.Close()).To(Succeed())

	db = openBolt(t, path)
	defer db.Close()
	ks := m.kube()
	f = mustFixture(t, fixtureOpts{db: db, yaml: yaml}, ks)
	checkModel(g, f.ipam, db, m, "after the restart")
}

// runModelRound runs the workers and a resync loop until the workers end.
func runModelRound(t *testing.T, i *ipam.Plugin, m *model, seed uint64) {
	var wg sync.WaitGroup
	stop := make(chan struct{})
	resyncs := make(chan error, 1)
	go func() { resyncs <- resyncLoop(i, m, stop) }()
	for w := range modelWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := runWorker(i, m, w, seed); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	close(stop)
	if err := <-resyncs; err != nil {
		t.Errorf("resync: %v", err)
	}
}

func runWorker(i *ipam.Plugin, m *model, w int, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, uint64(w)+100))
	for range modelOpsEach {
		id := podmodel.ID{Name: fmt.Sprintf("w%d-p%d", w, rng.IntN(modelPodsEach)), Namespace: "model"}
		if rng.IntN(3) == 0 {
			m.released(id, i.ReleasePodIP(id))
			continue
		}
		m.create(id)
		s, err := modelAllocate(i, id, rng.IntN(2) == 0)
		if err != nil {
			s = ""
		}
		if err := m.allocated(id, s, err); err != nil {
			return err
		}
	}
	return nil
}

// modelAllocate gives the pod an address through the pod-ID API or
// through an AddPod of its one attachment (which adopts a pod-keyed
// allocation, and which AllocatePodIP answers afterwards): either way the
// pod holds one address.
func modelAllocate(i *ipam.Plugin, id podmodel.ID, cni bool) (string, error) {
	if !cni {
		if _, err := i.AllocatePodIP(id, "", ""); err != nil {
			return "", err
		}
		return allAddresses(i, id), nil
	}
	ev, err := addConfirming(i, id, att(id.Name, "eth0"))
	if err != nil || len(ev.Interfaces) != 1 {
		return "", err
	}
	if ev.Reservation != "" {
		if err := i.ConfirmAttachment(context.Background(), att(id.Name, "eth0"), ev.Reservation); err != nil {
			return "", err
		}
	}
	var all []string
	for _, ip := range ev.Interfaces[0].IPAddresses {
		all = append(all, ip.Address.Addr().String())
	}
	return strings.Join(all, ","), nil
}

// allAddresses are the addresses of the pod's allocation, joined with
// commas (the pod has one allocation in the model).
func allAddresses(i *ipam.Plugin, id podmodel.ID) string {
	for _, a := range ipam.AllocationsOf(i).Pods {
		if a.PodID.Name == id.Name && a.PodID.Namespace == id.Namespace {
			if len(a.IPs) > 0 {
				return strings.Join(a.IPs, ",")
			}
			return a.MainIP
		}
	}
	return ""
}

// resyncLoop runs remote DB resyncs and healing resyncs until stop.
func resyncLoop(i *ipam.Plugin, m *model, stop <-chan struct{}) error {
	for n := 2; ; n++ {
		select {
		case <-stop:
			return nil
		default:
		}
		ks := m.kube()
		var ev api.Event = &api.DBResync{KubeState: ks}
		if n%2 == 1 {
			ev = &api.HealingResync{Type: api.AfterError}
		}
		// A resync whose store read outlasted storeTimeout (a loaded
		// machine, the race detector) is not fatal: the controller's
		// healing resync tries again, as this loop does.
		if err := i.Resync(ev, ks, n, nil); err != nil && api.IsFatal(err) {
			return err
		}
	}
}

// checkModel checks the invariants.
func checkModel(g Gomega, i *ipam.Plugin, db kvdb.Broker, m *model, when string) {
	families := ipam.FamilyCount(i)
	mem := map[podmodel.ID]string{}
	owners := map[string]podmodel.ID{}
	for _, a := range allocationsOf(g, i) {
		id := podmodel.ID{Name: a.PodID.Name, Namespace: a.PodID.Namespace}
		mem[id] = a.MainIP
		all := a.IPs
		if len(all) == 0 {
			all = []string{a.MainIP}
		}
		g.Expect(all).To(HaveLen(families), "%s: %s holds %v", when, id, all)
		for _, ip := range all {
			prev, dup := owners[ip]
			g.Expect(dup).To(BeFalse(), "%s: %s held by %s and %s in memory", when, ip, prev, id)
			owners[ip] = id
		}
	}
	rec := map[podmodel.ID]string{}
	byIP := map[string]string{}
	for key, r := range storedModel(g, db) {
		g.Expect(r.all).To(HaveLen(families), "%s: record %s holds %v", when, key, r.all)
		for _, ip := range r.all {
			prev, dup := byIP[ip]
			g.Expect(dup).To(BeFalse(), "%s: %s stored for %s and %s", when, ip, prev, key)
			byIP[ip] = key
		}
		rec[r.pod] = r.ip
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, ips := range m.acked {
		if _, unsure := m.maybe[id]; unsure {
			continue
		}
		ip := strings.Split(ips, ",")[0]
		g.Expect(rec).To(HaveKeyWithValue(id, ip), "%s: acknowledged allocation of %s not in bolt", when, id)
		g.Expect(mem).To(HaveKeyWithValue(id, ip), "%s: acknowledged allocation of %s not in memory", when, id)
	}
	for id, ip := range rec {
		g.Expect(mem).To(HaveKeyWithValue(id, ip), "%s: bolt holds %s for %s, memory does not", when, ip, id)
	}
}

// modelRecord is one stored allocation of the model's pods.
type modelRecord struct {
	pod podmodel.ID
	ip  string   // the first address
	all []string // every address
}

// storedModel reads the pod-keyed and the attachment records by key.
func storedModel(g Gomega, db kvdb.Broker) map[string]modelRecord {
	out := map[string]modelRecord{}
	kvs, _, err := db.List(context.Background(), ipam.AllocationPrefix)
	g.Expect(err).NotTo(HaveOccurred())
	for _, kv := range kvs {
		var id podmodel.ID
		_, err := fmt.Sscanf(kv.Key[len(ipam.AllocationPrefix):], "model/%s", &id.Name)
		g.Expect(err).NotTo(HaveOccurred())
		id.Namespace = "model"
		all := strings.Split(string(kv.Value), ",")
		out[kv.Key] = modelRecord{pod: id, ip: all[0], all: all}
	}
	kvs, _, err = db.List(context.Background(), ipam.AttachmentPrefix)
	g.Expect(err).NotTo(HaveOccurred())
	for _, kv := range kvs {
		var v struct {
			IP  string   `json:"ip"`
			IPs []string `json:"ips"`
			Pod struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"pod"`
		}
		g.Expect(json.Unmarshal(kv.Value, &v)).To(Succeed())
		all := v.IPs
		if len(all) == 0 {
			all = []string{v.IP}
		}
		out[kv.Key] = modelRecord{pod: podmodel.ID{Name: v.Pod.Name, Namespace: v.Pod.Namespace}, ip: v.IP, all: all}
	}
	return out
}

func allocationsOf(g Gomega, i *ipam.Plugin) []ipam.PodAllocation {
	return ipam.AllocationsOf(i).Pods
}
