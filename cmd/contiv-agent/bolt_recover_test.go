package main

import (
	"errors"
	"flag"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/kvdb/bolt"
	"github.com/contiv-ipam/agent/infra/servicelabel"
	"github.com/contiv-ipam/agent/plugins/contivconf"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ipam"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/nodesync"
)

// The node of the recovery test: node ID 1 with conf/contiv.conf's
// ipamConfig, so pods get addresses in 10.1.1.0/24.
const (
	recoveryNode   = "recovery-node"
	recoveryConfig = `
ipamConfig:
  podSubnetCIDR: 10.1.0.0/16
  podSubnetOneNodePrefixLen: 24
  vppHostSubnetCIDR: 172.30.0.0/16
  vppHostSubnetOneNodePrefixLen: 24
  nodeInterconnectCIDR: 192.168.16.0/24
  vxlanCIDR: 192.168.30.0/24
`
)

type recoveryLabel struct{}

func (recoveryLabel) GetAgentLabel() string { return recoveryNode }
func (recoveryLabel) GetAgentPrefix() string {
	return servicelabel.AllAgentsPrefix + recoveryNode + "/"
}
func (recoveryLabel) GetDifferentAgentPrefix(l string) string {
	return servicelabel.AllAgentsPrefix + l + "/"
}
func (recoveryLabel) GetAllAgentsPrefix() string { return servicelabel.AllAgentsPrefix }

// nodeOne is a nodesync that gave this node ID 1.
type nodeOne struct{}

func (nodeOne) GetNodeID() uint32                                                  { return 1 }
func (nodeOne) GetAllNodes() nodesync.Nodes                                        { return nodesync.Nodes{} }
func (nodeOne) PublishNodeIPs([]*nodesync.IPWithNetwork, nodesync.IPVersion) error { return nil }

// openRecoveryBolt builds the bolt plugin on path with the agent's flags
// args and runs its Init.
func openRecoveryBolt(t *testing.T, path string, args ...string) (*bolt.Plugin, error) {
	t.Helper()
	c := bolt.DefaultConfig()
	c.DBPath = path
	b := bolt.NewPlugin(bolt.UseConf(c), bolt.UseEnv(envOf(nil)), bolt.UseDeps(func(d *bolt.Deps) {
		d.Cfg, d.Log = config.NoFile, slog.New(slog.NewTextHandler(t.Output(), nil))
	}))
	fs := flag.NewFlagSet("contiv-agent", flag.ContinueOnError)
	b.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return b, b.Init()
}

// startIPAM runs ContivConf and IPAM on db and their first resync with
// the Kubernetes state ks; both are closed at cleanup.
func startIPAM(t *testing.T, db *bolt.Plugin, ks api.KubeStateData) *ipam.Plugin {
	t.Helper()
	g := NewWithT(t)
	cfg := contivconf.DefaultConfig()
	g.Expect(config.Decode([]byte(recoveryConfig), &cfg, "test contiv.conf")).To(Succeed())
	conf := contivconf.NewPlugin(contivconf.UseConf(cfg), contivconf.UseDeps(func(d *contivconf.Deps) {
		d.Log, d.ServiceLabel = slog.New(slog.DiscardHandler), recoveryLabel{}
	}))
	g.Expect(conf.Init()).To(Succeed())
	i := ipam.NewPlugin(ipam.UseDeps(func(d *ipam.Deps) {
		d.Log = slog.New(slog.NewTextHandler(t.Output(), nil))
		d.ContivConf, d.NodeSync, d.ServiceLabel, d.LocalDB = conf, nodeOne{}, recoveryLabel{}, db
	}))
	g.Expect(i.Init()).To(Succeed())
	t.Cleanup(func() { g.Expect(i.Close()).To(Succeed()) })
	g.Expect(i.AfterInit()).To(Succeed())
	g.Expect(i.Resync(&api.DBResync{KubeState: ks}, ks, 1, nil)).To(Succeed())
	return i
}

// kubeStateOf lists pods with their addresses (ip_address) as the
// Kubernetes state in etcd does.
func kubeStateOf(addrs map[podmodel.ID]net.IP) api.KubeStateData {
	ks := api.KubeStateData{podmodel.Keyword: {}}
	for id, ip := range addrs {
		pod := &podmodel.Pod{Name: id.Name, Namespace: id.Namespace}
		if ip != nil {
			pod.IpAddress = ip.String()
		}
		ks[podmodel.Keyword][podmodel.Key(id.Name, id.Namespace)] = pod
	}
	return ks
}

// TestDamagedBoltRefusedThenRecoveredFromKubernetes is the whole path of
// a damaged store: IPAM allocates on bolt; the file is cut to 10 kB (the
// SIGBUS of issue 9); a restart fails naming the file and -bolt-recover;
// a restart with -bolt-recover moves the file aside and IPAM learns the
// pods' addresses from the Kubernetes state, stores them again (a later
// plain restart restores them from bolt) and hands out no address twice.
func TestDamagedBoltRefusedThenRecoveredFromKubernetes(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "data", "bolt.db")
	pods := []podmodel.ID{{Name: "web-0", Namespace: "default"}, {Name: "web-1", Namespace: "default"},
		{Name: "dns", Namespace: "kube-system"}}

	db, err := openRecoveryBolt(t, path)
	g.Expect(err).NotTo(HaveOccurred())
	i := startIPAM(t, db, nil)
	addrs := map[podmodel.ID]net.IP{}
	for _, id := range pods {
		ip, err := i.AllocatePodIP(id, "", "")
		g.Expect(err).NotTo(HaveOccurred())
		addrs[id] = ip
	}
	g.Expect(i.Close()).To(Succeed())
	g.Expect(db.Close()).To(Succeed())

	g.Expect(os.Truncate(path, 10<<10)).To(Succeed())
	db, err = openRecoveryBolt(t, path)
	g.Expect(err).To(MatchError(bolt.ErrDamaged))
	g.Expect(err).To(MatchError(ContainSubstring(path)))
	g.Expect(err).To(MatchError(ContainSubstring("-bolt-recover")))
	g.Expect(db.Close()).To(Succeed())

	db, err = openRecoveryBolt(t, path, "-bolt-recover")
	g.Expect(err).NotTo(HaveOccurred())
	moved, err := filepath.Glob(path + ".damaged-*Z")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(moved).To(HaveLen(1), "the damaged file is kept aside")
	g.Expect(os.Stat(moved[0])).To(HaveField("Size()", int64(10<<10)))

	i = startIPAM(t, db, kubeStateOf(addrs))
	for id, ip := range addrs {
		g.Expect(i.GetPodIP(id).String()).To(Equal(ip.String()+"/32"), "%s learned from Kubernetes", id)
	}
	fresh, err := i.AllocatePodIP(podmodel.ID{Name: "new", Namespace: "default"}, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	for _, ip := range addrs {
		g.Expect(fresh.Equal(ip)).To(BeFalse(), "a learned address is not handed out again")
	}
	g.Expect(i.Close()).To(Succeed())
	g.Expect(db.Close()).To(Succeed())

	db, err = openRecoveryBolt(t, path)
	g.Expect(err).NotTo(HaveOccurred(), "the fresh file is sound")
	defer func() { g.Expect(db.Close()).To(Succeed()) }()
	noAddrs := map[podmodel.ID]net.IP{}
	for id := range addrs {
		noAddrs[id] = nil
	}
	i = startIPAM(t, db, kubeStateOf(noAddrs))
	for id, ip := range addrs {
		g.Expect(i.GetPodIP(id).String()).To(Equal(ip.String()+"/32"), "%s restored from the rebuilt store", id)
	}
}

// TestAgentBinaryRefusesAnEmptyBoltFileAndRecovers runs the binary on a
// zero-length bolt file, which main took as a new database (losing every
// allocation): start-up fails with exit 1 naming the file and the flag;
// with BOLT_RECOVER=true the file is moved aside, the move is logged and
// the agent turns ready.
func TestAgentBinaryRefusesAnEmptyBoltFileAndRecovers(t *testing.T) {
	dir := t.TempDir()
	writeRunConfig(t, dir, "127.0.0.1:0")
	dbPath := filepath.Join(dir, "data", "bolt.db")
	if err := os.MkdirAll(filepath.Dir(dbPath), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dbPath, "")

	msgs, err := startAgent(t, dir).waitExit(t, 60*time.Second)
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 1 {
		t.Fatalf("exit: %v, want status 1", err)
	}
	last := msgs[len(msgs)-1]
	for _, want := range []string{`damaged database file "` + dbPath + `"`, "empty (0 bytes)", "-bolt-recover (env BOLT_RECOVER=true)"} {
		if !strings.Contains(last, want) {
			t.Errorf("last line %q lacks %q", last, want)
		}
	}

	p := startAgent(t, dir, "BOLT_RECOVER=true")
	rec := p.waitLine(t, "the move", 30*time.Second, func(rec map[string]any) bool {
		msg, _ := rec["msg"].(string)
		return strings.HasPrefix(msg, "damaged database moved aside by -bolt-recover")
	})
	moved, _ := rec["moved-to"].(string)
	if !strings.HasPrefix(moved, dbPath+".damaged-") {
		t.Errorf("moved-to %q, want %s.damaged-<time>", moved, dbPath)
	}
	if st, err := os.Stat(moved); err != nil || st.Size() != 0 {
		t.Errorf("moved file: %v, %v; want the empty file kept", st, err)
	}
	p.waitReady(t)
	if err := p.stop(t); err != nil {
		t.Errorf("exit after SIGINT: %v", err)
	}
}

// waitExit collects the log messages until the agent exits (within
// timeout) and returns them with its exit error.
func (p *agentProc) waitExit(t *testing.T, timeout time.Duration) ([]string, error) {
	t.Helper()
	var msgs []string
	deadline := time.After(timeout)
	for {
		select {
		case rec, ok := <-p.lines:
			if !ok {
				return msgs, <-p.done
			}
			msg, _ := rec["msg"].(string)
			msgs = append(msgs, msg)
		case <-deadline:
			t.Fatalf("agent still running %v after start; log: %q", timeout, msgs)
		}
	}
}
