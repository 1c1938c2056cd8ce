package ipam_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/netip"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/rest"
	"github.com/contiv-ipam/agent/plugins/ipam"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// conflicts lists the records moved aside over REST.
func (f *restFixture) conflicts(g Gomega) []ipam.Conflict {
	status, body := f.srv.Do(http.MethodGet, ipam.ConflictsPath, "", admin())
	g.Expect(status).To(Equal(http.StatusOK), body)
	var got ipam.Conflicts
	g.Expect(json.Unmarshal([]byte(body), &got)).To(Succeed())
	return got.Conflicts
}

// A record that a restore cannot place (its address is in no pod subnet
// or pool of the node) is moved aside, never deleted: listed with why and
// with the record itself, counted, and resolved by an operator.
func TestARecordOutsideThePoolsIsMovedAsideNotDeleted(t *testing.T) {
	g := NewWithT(t)
	db := openBolt(t, filepath.Join(t.TempDir(), "bolt.db"))
	defer db.Close()
	ctx := context.Background()
	ghost := podmodel.ID{Name: "ghost", Namespace: "default"}
	g.Expect(db.Put(ctx, podKey(ghost), []byte("9.9.9.9"))).To(Succeed())
	f := newRESTFixture(t, restOpts{db: db, rest: []rest.Option{basicAuthConf()}})

	_, found, err := db.Get(ctx, podKey(ghost))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeFalse(), "moved, not left in place")
	cs := f.conflicts(g)
	g.Expect(cs).To(HaveLen(1))
	g.Expect(cs[0].Name).To(Equal("default/ghost"))
	g.Expect(cs[0].Reason).To(ContainSubstring("9.9.9.9 is not in a pod subnet or pool of this node (1.2.128.8/29)"))
	g.Expect(cs[0].Key).To(Equal(podKey(ghost)))
	g.Expect(cs[0].Value).To(Equal("9.9.9.9"), "the record itself is kept")
	g.Expect(f.log.records("a stored pod allocation could not be restored: moved aside for an operator to resolve")).To(HaveLen(1))

	status, body := f.post(ipam.OperatorRestoreConflictPath, `{"conflict": "default/ghost"}`, admin())
	g.Expect(status).To(Equal(http.StatusConflict), body)
	g.Expect(body).To(ContainSubstring(`"reason": "cannot-restore"`))
	status, body = f.post(ipam.OperatorDiscardConflictPath, `{"conflict": "default/nobody"}`, admin())
	g.Expect(status).To(Equal(http.StatusNotFound), body)
	status, body = f.post(ipam.OperatorDiscardConflictPath, `{"conflict": "default/ghost"}`, admin())
	g.Expect(status).To(Equal(http.StatusOK), body)
	g.Expect(f.conflicts(g)).To(BeEmpty())
}

// A pool list that lost a pool (a store restored from an old copy): the
// restart moves the records of that pool aside instead of deleting them;
// once the pool is added again, the operator restores them and the pods
// hold their addresses, stored as before.
func TestARecordMovedAsideIsRestoredOnceItsPoolIsBack(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "bolt.db")
	db := openBolt(t, path)
	ctx := context.Background()
	pool := netip.MustParsePrefix("1.2.250.0/29")
	f := mustFixture(t, fixtureOpts{db: db}, nil)
	g.Expect(f.ipam.AddPool(pool)).To(Succeed())
	var inPool podmodel.ID
	var addr string
	for n := range 5 {
		id := podmodel.ID{Name: "p" + string(rune('0'+n)), Namespace: "default"}
		ip, err := f.ipam.AllocatePodIP(id, "", "")
		g.Expect(err).NotTo(HaveOccurred())
		if pool.Contains(netip.MustParseAddr(ip.String())) {
			inPool, addr = id, ip.String()
		}
	}
	g.Expect(addr).NotTo(BeEmpty(), "the 5th pod got an address of the pool")
	f.close(t)
	g.Expect(db.Put(ctx, ipam.BlocksKey, []byte("[]"))).To(Succeed()) // the list lost the pool
	g.Expect(db.Close()).To(Succeed())

	db = openBolt(t, path)
	defer db.Close()
	r := newRESTFixture(t, restOpts{db: db, rest: []rest.Option{basicAuthConf()}})
	g.Expect(r.ipam.GetPodIP(inPool)).To(BeNil(), "not restored into a pool the node does not have")
	cs := r.conflicts(g)
	g.Expect(cs).To(HaveLen(1))
	g.Expect(cs[0].IP).To(Equal(addr))

	g.Expect(r.ipam.AddPool(pool)).To(Succeed())
	status, body := r.post(ipam.OperatorRestoreConflictPath, `{"conflict": "`+cs[0].Name+`"}`, admin())
	g.Expect(status).To(Equal(http.StatusOK), body)
	g.Expect(ipOf(r.ipam.GetPodIP(inPool)).String()).To(Equal(addr))
	g.Expect(stored(g, db, inPool)).To(Equal(addr), "stored as it was")
	g.Expect(r.conflicts(g)).To(BeEmpty())
}
