package ipam_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/kvdb/bolt"
	"github.com/contiv-ipam/agent/plugins/contivconf"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ipam"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// crashChildEnv makes the test binary run crashChild instead of the tests.
const crashChildEnv = "IPAM_CRASH_CHILD_BOLT"

func TestMain(m *testing.M) {
	if mode := os.Getenv(chaosChildEnv); mode != "" {
		if err := chaosChild(mode); err != nil {
			fmt.Fprintln(os.Stderr, "chaos child:", err)
			os.Exit(3)
		}
		os.Exit(0)
	}
	if path := os.Getenv(crashChildEnv); path != "" {
		if err := crashChild(path); err != nil {
			fmt.Fprintln(os.Stderr, "crash child:", err)
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// crashChild allocates addresses for pods c0, c1, ... forever, printing
// "pod ip" after each AllocatePodIP returned, until it is killed.
func crashChild(path string) error {
	bc := bolt.DefaultConfig()
	bc.DBPath = path
	db := bolt.NewPlugin(bolt.UseConf(bc), bolt.UseDeps(func(d *bolt.Deps) { d.Cfg, d.Log = config.NoFile, quietLog() }))
	if err := db.Init(); err != nil {
		return err
	}
	cfg, err := contivconf.DecodeConfig([]byte(crashConfig), "crash contiv.conf")
	if err != nil {
		return err
	}
	conf := contivconf.NewPlugin(contivconf.UseConf(cfg), contivconf.UseDeps(func(d *contivconf.Deps) {
		d.Log, d.ServiceLabel = quietLog(), fakeLabel{thisNode}
	}))
	if err := conf.Init(); err != nil {
		return err
	}
	ns := &fakeNodeSync{}
	ns.id.Store(1)
	i := ipam.NewPlugin(ipam.UseDeps(func(d *ipam.Deps) {
		d.Log, d.ContivConf, d.NodeSync, d.ServiceLabel, d.LocalDB = quietLog(), conf, ns, fakeLabel{thisNode}, db
	}))
	if err := i.Init(); err != nil {
		return err
	}
	if err := i.AfterInit(); err != nil {
		return err
	}
	if err := i.Resync(&api.DBResync{}, api.KubeStateData{}, 1, nil); err != nil {
		return err
	}
	out := bufio.NewWriter(os.Stdout)
	for n := 0; ; n++ {
		id := podmodel.ID{Name: fmt.Sprintf("c%d", n), Namespace: "crash"}
		ip, err := i.AllocatePodIP(id, "", "")
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s %s\n", id.Name, ip)
		if err := out.Flush(); err != nil {
			return err
		}
	}
}

const crashConfig = `
ipamConfig:
  podSubnetCIDR: 10.1.0.0/16
  podSubnetOneNodePrefixLen: 20
  nodeInterconnectCIDR: 192.168.16.0/24
`

// Acknowledged means durable: every address a killed process reported as
// allocated is restored for its pod, and no other pod gets it.
func TestAllocationsSurviveSIGKILL(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "bolt.db")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
	stdout, err := cmd.StdoutPipe()
	g.Expect(err).NotTo(HaveOccurred())
	cmd.Stderr = os.Stderr
	g.Expect(cmd.Start()).To(Succeed())
	acked := map[string]string{}
	sc := bufio.NewScanner(stdout)
	for len(acked) < 200 && sc.Scan() {
		pod, ip, _ := strings.Cut(sc.Text(), " ")
		acked[pod] = ip
	}
	g.Expect(cmd.Process.Kill()).To(Succeed())
	_ = cmd.Wait()
	g.Expect(acked).To(HaveLen(200), "the child reported allocations")

	db := openBolt(t, path)
	defer db.Close()
	i := mustFixture(t, fixtureOpts{db: db, yaml: crashConfig}, nil).ipam
	for pod, ip := range acked {
		got := i.GetPodIP(podmodel.ID{Name: pod, Namespace: "crash"})
		g.Expect(got).NotTo(BeNil(), "pod %s lost its address %s", pod, ip)
		g.Expect(got.IP.String()).To(Equal(ip), "pod %s", pod)
	}
	for n := range 50 {
		ip, err := i.AllocatePodIP(podmodel.ID{Name: fmt.Sprintf("after%d", n), Namespace: "crash"}, "", "")
		g.Expect(err).NotTo(HaveOccurred())
		owner, _ := i.GetPodFromIP(ip)
		g.Expect(owner.Namespace + "/" + owner.Name).To(Equal(fmt.Sprintf("crash/after%d", n)))
		for pod, a := range acked {
			g.Expect(ip.String()).NotTo(Equal(a), "new pod got %s of %s", a, pod)
		}
	}
}
