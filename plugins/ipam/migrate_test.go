package ipam_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ipam"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// v1Config is the contiv.conf testdata/v1-pods.db was written with (node
// ID 1: pod subnet 10.1.1.0/24).
const v1Config = "ipamConfig:\n  nodeInterconnectCIDR: 192.168.16.0/24\n"

// v1Pods are the allocations of testdata/v1-pods.db (see its README).
var v1Pods = map[string]string{
	"default/web-00": "10.1.1.2", "team-a/web-01": "10.1.1.3", "default/web-02": "10.1.1.4",
	"team-a/web-05": "10.1.1.7", "default/web-06": "10.1.1.8", "team-a/web-07": "10.1.1.9",
	"default/web-08": "10.1.1.10", "team-a/web-09": "10.1.1.11", "default/web-10": "10.1.1.12",
	"default/web-12": "10.1.1.14", "team-a/web-13": "10.1.1.15", "default/web-14": "10.1.1.16",
	"team-a/web-15": "10.1.1.17", "team-a/web-17": "10.1.1.19", "default/web-18": "10.1.1.20",
	"team-a/web-19": "10.1.1.21",
}

// copyV1 copies testdata/v1-pods.db into a temporary directory.
func copyV1(t *testing.T) string {
	t.Helper()
	src, err := os.Open(filepath.Join("testdata", "v1-pods.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	path := filepath.Join(t.TempDir(), "bolt.db")
	dst, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// heldPods lists the plugin's allocations as "<ns>/<name>" -> address.
func heldPods(i *ipam.Plugin) map[string]string {
	out := map[string]string{}
	for _, a := range ipam.AllocationsOf(i).Pods {
		out[a.PodID.Namespace+"/"+a.PodID.Name] = a.MainIP
	}
	return out
}

// storedPods lists the pod-keyed records as "<ns>/<name>" -> value.
func storedPods(g Gomega, db kvdb.Broker) map[string]string {
	kvs, _, err := db.List(context.Background(), ipam.AllocationPrefix)
	g.Expect(err).NotTo(HaveOccurred())
	out := map[string]string{}
	for _, kv := range kvs {
		out[kv.Key[len(ipam.AllocationPrefix):]] = string(kv.Value)
	}
	return out
}

// schemaWrites counts the writes that touch the schema key.
func schemaWrites(fdb *faultDB, fail bool) *atomic.Int32 {
	var n atomic.Int32
	fdb.setDecide(func(ops []kvdb.Op) fault {
		if !touches(ops, ipam.SchemaKey) {
			return pass
		}
		n.Add(1)
		if fail {
			return failBefore
		}
		return pass
	})
	return &n
}

func schemaValue(g Gomega, db kvdb.Broker) string {
	kv, found, err := db.Get(context.Background(), ipam.SchemaKey)
	g.Expect(err).NotTo(HaveOccurred())
	if !found {
		return ""
	}
	return string(kv.Value)
}

// A v1 file written by the code before attachment keys: every allocation
// survives with its address, the cursor is kept, the schema key says 2,
// and a second start migrates nothing (v1 goes straight to v3: its
// records are v3's pod-keyed records as they are).
func TestAV1StoreIsMigratedOnce(t *testing.T) {
	g := NewWithT(t)
	path := copyV1(t)
	db := openBolt(t, path)
	fdb := newFaultDB(db)
	writes := schemaWrites(fdb, false)
	f := mustFixture(t, fixtureOpts{db: fdb, yaml: v1Config}, nil)
	g.Expect(writes.Load()).To(Equal(int32(1)), "one transaction")
	g.Expect(schemaValue(g, db)).To(Equal("3"))
	g.Expect(heldPods(f.ipam)).To(Equal(v1Pods))
	g.Expect(storedPods(g, db)).To(Equal(v1Pods), "the v1 records are v2's pod-keyed records")
	f.close(t)
	g.Expect(db.Close()).To(Succeed())

	db = openBolt(t, path)
	defer db.Close()
	fdb = newFaultDB(db)
	writes = schemaWrites(fdb, false)
	f = mustFixture(t, fixtureOpts{db: fdb, yaml: v1Config}, nil)
	g.Expect(writes.Load()).To(BeZero(), "nothing to migrate at the second start")
	g.Expect(heldPods(f.ipam)).To(Equal(v1Pods))
	ip, err := f.ipam.AllocatePodIP(pod1, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ip.String()).To(Equal("10.1.1.22"), "next-fit goes on after the stored cursor, not at a released address")
	g.Expect(mustAdd(g, f.ipam, podIDOf("team-a/web-05"), att("c5", "eth0"))).To(Equal("10.1.1.7"), "the first ADD adopts the migrated address")
}

// A failed migration transaction changes nothing: the v1 data is intact,
// the agent serves it, and the next start migrates.
func TestAFailedMigrationLeavesTheV1DataAndTheNextStartMigrates(t *testing.T) {
	g := NewWithT(t)
	path := copyV1(t)
	db := openBolt(t, path)
	fdb := newFaultDB(db)
	writes := schemaWrites(fdb, true)
	f := mustFixture(t, fixtureOpts{db: fdb, yaml: v1Config}, nil)
	g.Expect(writes.Load()).To(Equal(int32(1)))
	g.Expect(schemaValue(g, db)).To(BeEmpty())
	g.Expect(storedPods(g, db)).To(Equal(v1Pods))
	kv, _, err := db.Get(context.Background(), ipam.CursorKey)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(kv.Value)).To(Equal("10.1.1.21"))
	g.Expect(heldPods(f.ipam)).To(Equal(v1Pods), "served all the same")
	f.close(t)
	g.Expect(db.Close()).To(Succeed())

	db = openBolt(t, path)
	defer db.Close()
	f = mustFixture(t, fixtureOpts{db: db, yaml: v1Config}, nil)
	g.Expect(schemaValue(g, db)).To(Equal("3"))
	g.Expect(heldPods(f.ipam)).To(Equal(v1Pods))
}

// A store of a newer layout is refused (the agent must not overwrite what
// it cannot read), with an error naming the key, the version found and
// the one supported; nothing is written.
func TestANewerOrUnreadableSchemaIsRefused(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  []string
		is    error // nil: no sentinel
	}{
		{"4", []string{ipam.SchemaKey, "= 4", "supports 3", "newer IPAM layout"}, ipam.ErrSchemaTooNew},
		{"two", []string{ipam.SchemaKey, `"two"`, "not a version", "supports 3"}, nil},
	} {
		t.Run(tc.value, func(t *testing.T) {
			g := NewWithT(t)
			db := openBolt(t, copyV1(t))
			defer db.Close()
			g.Expect(db.Put(context.Background(), ipam.SchemaKey, []byte(tc.value))).To(Succeed())
			_, err := newFixture(t, fixtureOpts{db: db, yaml: v1Config}, nil)
			g.Expect(err).To(HaveOccurred())
			var fatal *api.FatalError
			g.Expect(errors.As(err, &fatal)).To(BeTrue(), "the agent stops")
			if tc.is != nil {
				g.Expect(err).To(MatchError(tc.is))
			}
			for _, w := range tc.want {
				g.Expect(err.Error()).To(ContainSubstring(w))
			}
			g.Expect(schemaValue(g, db)).To(Equal(tc.value))
			g.Expect(storedPods(g, db)).To(Equal(v1Pods))
		})
	}
}

// A new (empty) store gets the schema key at the first start.
func TestANewStoreIsMarkedV3(t *testing.T) {
	g := NewWithT(t)
	db := openBolt(t, filepath.Join(t.TempDir(), "bolt.db"))
	defer db.Close()
	mustFixture(t, fixtureOpts{db: db}, nil)
	g.Expect(schemaValue(g, db)).To(Equal("3"))
}

// podIDOf parses "<ns>/<name>".
func podIDOf(s string) podmodel.ID {
	ns, name, _ := strings.Cut(s, "/")
	return podmodel.ID{Name: name, Namespace: ns}
}

// A v2 store (attachment records, no second family) becomes v3 with one
// write of the schema key; every record is served as it was.
func TestAV2StoreIsMigratedToV3(t *testing.T) {
	g := NewWithT(t)
	path := copyV1(t)
	db := openBolt(t, path)
	ctx := context.Background()
	g.Expect(db.Put(ctx, ipam.SchemaKey, []byte("2"))).To(Succeed())
	v2 := `{"ip":"10.1.1.9","pod":{"name":"web-09","namespace":"team-b"},"network":"net","containerId":"c9","ifName":"eth0"}`
	g.Expect(db.Put(ctx, ipam.AttachmentPrefix+"net/c9/eth0", []byte(v2))).To(Succeed())
	fdb := newFaultDB(db)
	writes := schemaWrites(fdb, false)
	f := mustFixture(t, fixtureOpts{db: fdb, yaml: v1Config}, nil)
	defer db.Close()
	g.Expect(writes.Load()).To(Equal(int32(1)), "one transaction")
	g.Expect(schemaValue(g, db)).To(Equal("3"))
	g.Expect(attIP(g, f.ipam, att("c9", "eth0"))).To(Equal("10.1.1.9/24"))
	kv, _, err := db.Get(ctx, ipam.AttachmentPrefix+"net/c9/eth0")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(kv.Value)).To(Equal(v2), "not rewritten")
}
