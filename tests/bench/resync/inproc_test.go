package resync

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/kvdb/bolt"
	"github.com/contiv-ipam/agent/infra/servicelabel"
	"github.com/contiv-ipam/agent/plugins/contivconf"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/controller/dbresources"
	"github.com/contiv-ipam/agent/plugins/ipam"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/nodesync"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// label names this node (servicelabel.ReaderAPI).
type label string

func (l label) GetAgentLabel() string  { return string(l) }
func (l label) GetAgentPrefix() string { return servicelabel.AllAgentsPrefix + string(l) + "/" }
func (l label) GetDifferentAgentPrefix(o string) string {
	return servicelabel.AllAgentsPrefix + o + "/"
}
func (l label) GetAllAgentsPrefix() string { return servicelabel.AllAgentsPrefix }

// claimedID is nodesync after its claim: this node has ID 1 and its
// Kubernetes management address (what IPAM reads to tell which pods run
// here).
type claimedID struct{}

func (claimedID) GetNodeID() uint32 { return 1 }
func (claimedID) GetAllNodes() nodesync.Nodes {
	return nodesync.Nodes{thisNode: {ID: 1, Name: thisNode, MgmtIPAddresses: []net.IP{nodeIP(1).AsSlice()}}}
}
func (claimedID) PublishNodeIPs([]*nodesync.IPWithNetwork, nodesync.IPVersion) error { return nil }

var _ nodesync.API = claimedID{}

// inProc is the in-process setup: the decoded Kubernetes state and a bolt
// file holding this node's allocations, made through IPAM's AddPod
// handler as the CNI path makes them.
type inProc struct {
	conf  *contivconf.Plugin
	bolt  *bolt.Plugin
	state api.KubeStateData
	local map[string]netip.Addr // this node's pods' addresses by name
	log   *slog.Logger
}

// newInProc opens bolt in dir, allocates s.local addresses through a
// first IPAM instance (on the state of the nodes only), closes it, and
// decodes the whole state (with the local pods at their addresses) the
// way the controller's DB watcher does.
func newInProc(tb testing.TB, s shape, dir string) (*inProc, error) {
	tb.Helper()
	f := &inProc{log: slog.New(slog.DiscardHandler)}
	cfg := contivconf.DefaultConfig()
	if err := config.Decode([]byte(benchContivConf), &cfg, "bench contiv.conf"); err != nil {
		return nil, err
	}
	f.conf = contivconf.NewPlugin(contivconf.UseConf(cfg), contivconf.UseDeps(func(d *contivconf.Deps) {
		d.Log, d.ServiceLabel = f.log, label(thisNode)
	}))
	if err := f.conf.Init(); err != nil {
		return nil, err
	}
	bc := bolt.DefaultConfig()
	bc.DBPath = filepath.Join(dir, "bolt.db")
	f.bolt = bolt.NewPlugin(bolt.UseConf(bc), bolt.UseDeps(func(d *bolt.Deps) { d.Cfg, d.Log = config.NoFile, f.log }))
	if err := f.bolt.Init(); err != nil {
		return nil, err
	}
	tb.Cleanup(func() { _ = f.bolt.Close() })

	nodes, err := s.nodeKVs()
	if err != nil {
		return nil, err
	}
	first, err := f.start(decode(nodes))
	if err != nil {
		return nil, err
	}
	f.local, err = addLocalPods(first, s.local)
	if cerr := first.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	pods, err := s.podKVs(f.local)
	if err != nil {
		return nil, err
	}
	f.state = decode(append(nodes, pods...))
	return f, nil
}

// decode builds the Kubernetes state of kvs as the DB watcher's remote
// resync does: an entry for every resource keyword, each key decoded by
// dbresources.Decode. A key that does not decode panics: the benchmark
// wrote it.
func decode(kvs []kv) api.KubeStateData {
	state := make(api.KubeStateData)
	for _, kw := range dbresources.Keywords() {
		state[kw] = make(api.KubeResourceData)
	}
	for _, e := range kvs {
		kw, value, err := dbresources.Decode(e.key, e.value)
		if err != nil {
			panic(err)
		}
		state.Apply(kw, e.key, value)
	}
	return state
}

// newIPAM builds and starts (Init, AfterInit) an IPAM plugin on the bolt
// file, as the agent does at start.
func (f *inProc) newIPAM() (*ipam.Plugin, error) {
	p := ipam.NewPlugin(ipam.UseDeps(func(d *ipam.Deps) {
		d.Log, d.ContivConf, d.NodeSync = f.log, f.conf, claimedID{}
		d.ServiceLabel, d.LocalDB = label(thisNode), f.bolt
	}))
	if err := p.Init(); err != nil {
		return nil, err
	}
	return p, p.AfterInit()
}

// resync runs the first DB resync of a started plugin, as the event loop
// hands it over (a remote DB resync, the first of the loop).
func resync(p *ipam.Plugin, ks api.KubeStateData) error {
	return p.Resync(&api.DBResync{KubeState: ks}, ks, 1, nil)
}

// start is newIPAM then its first resync on ks.
func (f *inProc) start(ks api.KubeStateData) (*ipam.Plugin, error) {
	p, err := f.newIPAM()
	if err != nil {
		return nil, err
	}
	if err := resync(p, ks); err != nil {
		return nil, errors.Join(err, p.Close())
	}
	return p, nil
}

// addLocalPods allocates one attachment (network "default", eth0) for
// each of n local pods through IPAM's AddPod handler and waits until each
// is durable; it returns the addresses by pod name.
func addLocalPods(p *ipam.Plugin, n int) (map[string]netip.Addr, error) {
	out := make(map[string]netip.Addr, n)
	for k := 0; k < n; k++ {
		name := localPodName(k)
		ev := podmanager.NewAddPod()
		ev.Pod = podmodel.ID{Name: name, Namespace: localNamespace}
		ev.Key = podmanager.AttachmentKey{Network: "default", ContainerID: "c-" + name, IfName: "eth0"}
		ev.NetworkNamespace = "/var/run/netns/" + name
		if _, err := p.Update(ev, nil); err != nil {
			return nil, fmt.Errorf("AddPod %s: %w", name, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := ev.Wait(ctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("AddPod %s: %w", name, err)
		}
		if len(ev.Interfaces) != 1 || len(ev.Interfaces[0].IPAddresses) != 1 {
			return nil, fmt.Errorf("AddPod %s: reply without one address: %+v", name, ev.Interfaces)
		}
		out[name] = ev.Interfaces[0].IPAddresses[0].Address.Addr()
	}
	return out, nil
}
