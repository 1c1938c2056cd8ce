package awsdiff

import (
	"bytes"
	"encoding/json"
	"flag"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"

	"github.com/contiv-ipam/agent/plugins/ipam/checkpoint"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

var update = flag.Bool("update", false, "rewrite the AWS checkpoint fixture of contiv-netctl's tests with the datastore's code")

// fixture is the copy contiv-netctl's tests read.
const fixture = "../../cmd/contiv-netctl/testdata/aws-vpc-cni-ipam.json"

// fixturePods are the pods of the fixture, by container: each address is
// in node 1's pod subnet 10.1.0.16/28 under testenv.DualStackConf but
// far-0's, which is outside.
var fixturePods = []struct {
	cid, pod, ip string
}{
	{"c-web-0", "web-0", "10.1.0.18"},
	{"c-web-1", "web-1", "10.1.0.20"},
	{"c-db-0", "db-0", "10.1.0.21"},
	{"c-far-0", "far-0", "10.1.7.9"},
}

// writeFixture has the datastore write its checkpoint file at path: two
// ENIs with secondary addresses, four pods assigned, one assigned and
// released.
func writeFixture(t *testing.T, path string) {
	t.Helper()
	a := newAWS(t, datastore.NewJSONFile(path))
	enis := map[string][]string{
		"eni-0a1b2c3d4e5f60001": {"10.1.0.18", "10.1.0.19", "10.1.0.20", "10.1.0.21", "10.1.0.22"},
		"eni-0a1b2c3d4e5f60002": {"10.1.7.9", "10.1.7.10"},
	}
	n := 0
	for id, ips := range enis {
		n++
		if err := a.ds.AddENI(id, n, n == 1, false, false, 0, ""); err != nil {
			t.Fatal(err)
		}
		for _, ip := range ips {
			if err := a.ds.AddIPv4CidrToStore(id, host(netip.MustParseAddr(ip)), false); err != nil {
				t.Fatal(err)
			}
		}
	}
	assign := func(cid, pod, ip string) {
		key := podmanager.AttachmentKey{Network: "aws-cni", ContainerID: cid, IfName: "eth0"}
		undo := a.only(netip.MustParseAddr(ip))
		got, _, _, err := a.ds.AssignPodIPv4Address(awsKey(key), datastore.IPAMMetadata{K8SPodNamespace: "default", K8SPodName: pod})
		undo()
		if err != nil || got != ip {
			t.Fatalf("assign %s: %q %v, want %s", cid, got, err, ip)
		}
	}
	assign("c-gone-0", "gone-0", "10.1.0.19")
	if _, err := a.awsUnassign(podmanager.AttachmentKey{Network: "aws-cni", ContainerID: "c-gone-0", IfName: "eth0"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range fixturePods {
		assign(p.cid, p.pod, p.ip)
	}
}

// The datastore writes its checkpoint file; DecodeAWS reads it as the
// pods the datastore holds; the copy contiv-netctl's tests read is such
// a file (-args -update rewrites it), byte for byte what the datastore's
// JSONFile writes for its data, and one the datastore restores.
func TestAWSCheckpointFixture(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "ipam.json")
	writeFixture(t, path)
	fresh, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	if *update {
		g.Expect(os.WriteFile(fixture, fresh, 0o644)).To(Succeed())
	}
	want := map[string]string{}
	for _, p := range fixturePods {
		want["aws-cni/"+p.cid+"/eth0"] = p.ip + " default/" + p.pod
	}
	for name, doc := range map[string][]byte{"written now": fresh, "committed": mustRead(t, fixture)} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			d, err := checkpoint.DecodeAWS(doc, time.Now())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(entriesOf(d)).To(Equal(want))
			for _, e := range d.Allocations {
				g.Expect(e.AllocatedAt).To(BeTemporally("~", time.Now(), 5*365*24*time.Hour))
			}

			// As the datastore's JSONFile writes its data.
			var data datastore.CheckpointData
			g.Expect(json.Unmarshal(doc, &data)).To(Succeed())
			var again bytes.Buffer
			g.Expect(json.NewEncoder(&again).Encode(&data)).To(Succeed())
			g.Expect(again.String()).To(Equal(string(doc)))

			// The datastore restores it.
			file := filepath.Join(t.TempDir(), "ipam.json")
			g.Expect(os.WriteFile(file, doc, 0o600)).To(Succeed())
			a := newAWS(t, datastore.NewJSONFile(file))
			g.Expect(a.ds.AddENI("eni-1", 1, true, false, false, 0, "")).To(Succeed())
			for _, p := range fixturePods {
				g.Expect(a.ds.AddIPv4CidrToStore("eni-1", host(netip.MustParseAddr(p.ip)), false)).To(Succeed())
				a.links.veths["default/"+p.pod] = true
			}
			g.Expect(a.ds.ReadBackingStore(false)).To(Succeed())
			g.Expect(a.ds.AllocatedIPs()).To(HaveLen(len(fixturePods)))
		})
	}
}

// Both checkpointers: a missing file restores as "does not exist";
// each keeps whole documents (no temporary file left, mode 0600); the
// two files of the same allocations say the same.
func TestCheckpointersAgree(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	awsFile := datastore.NewJSONFile(filepath.Join(dir, "aws.json"))
	ourFile := checkpoint.NewJSONFile(filepath.Join(dir, "ours.json"))
	var into datastore.CheckpointData
	g.Expect(awsFile.Restore(&into)).To(MatchError(fs.ErrNotExist))
	var d checkpoint.Data
	g.Expect(ourFile.Restore(&d)).To(MatchError(fs.ErrNotExist))
	g.Expect(ourFile.Restore(&d)).To(MatchError(checkpoint.ErrNoCheckpoint))

	p := newPairWith(t, false, awsFile)
	p.addENI(0)
	for _, a := range window(0) {
		p.addAddr(0, a)
	}
	p.assign(keyOf(1, "eth0"))
	p.assign(keyOf(2, "eth0"))
	p.unassign(keyOf(1, "eth0"))
	p.assign(keyOf(3, "eth1"))
	p.check()
	ourData, err := p.o.k.ExportCheckpoint()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ourFile.Checkpoint(ourData)).To(Succeed())

	awsDoc := mustRead(t, filepath.Join(dir, "aws.json"))
	fromAWS, err := checkpoint.DecodeAWS(awsDoc, time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ourFile.Restore(&d)).To(Succeed())
	g.Expect(entriesOf(fromAWS)).To(Equal(entriesOf(d)))
	g.Expect(entriesOf(d)).To(HaveLen(2))
	es, err := os.ReadDir(dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(es).To(HaveLen(2), "no temporary file left")
	for _, e := range es {
		info, err := e.Info()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(info.Mode().Perm()).To(Equal(os.FileMode(0o600)), e.Name())
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
