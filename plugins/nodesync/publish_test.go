package nodesync_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
	"github.com/contiv-ipam/agent/plugins/nodesync"
)

func ipn(t *testing.T, s string) *nodesync.IPWithNetwork {
	t.Helper()
	ip, n, err := net.ParseCIDR(s)
	if err != nil {
		t.Fatal(err)
	}
	return &nodesync.IPWithNetwork{Address: ip, Network: n}
}

// revision returns the mod revision of this node's record.
func revision(t *testing.T, db kvdb.Store, id uint32) int64 {
	t.Helper()
	kv, found, err := db.NewBroker(codec.KSRPrefix).Get(context.Background(), vppnode.Key(id))
	if err != nil || !found {
		t.Fatalf("record %d: found %v, %v", id, found, err)
	}
	return kv.Revision
}

func TestPublishNodeIPs(t *testing.T) {
	g := NewWithT(t)
	db := newDB(t, etcdtest.Start(t))
	putRecord(t, db, &vppnode.VppNode{Id: 1, Name: "node-a"})
	p := newPlugin(t, "node-x", db, &loop{})
	g.Expect(resync(p, nil)).To(Succeed())
	claimed := revision(t, db, 2)

	// first publication writes
	g.Expect(p.PublishNodeIPs([]*nodesync.IPWithNetwork{ipn(t, "192.168.16.2/24"), ipn(t, "192.168.16.2/24")}, nodesync.IPv4)).To(Succeed())
	rec := records(t, db)[2]
	g.Expect(rec.GetId()).To(Equal(uint32(2)))
	g.Expect(rec.GetName()).To(Equal("node-x"))
	g.Expect(rec.GetIpAddresses()).To(Equal([]string{"192.168.16.2/24"}), "duplicates dropped")
	written := revision(t, db, 2)
	g.Expect(written).To(BeNumerically(">", claimed))
	g.Expect(vppStrings(p.GetAllNodes()["node-x"])).To(Equal([]string{"192.168.16.2/24"}))

	// the same set again: no write
	g.Expect(p.PublishNodeIPs([]*nodesync.IPWithNetwork{ipn(t, "192.168.16.2/24")}, nodesync.IPv4)).To(Succeed())
	g.Expect(revision(t, db, 2)).To(Equal(written))

	// the other version is kept
	g.Expect(p.PublishNodeIPs([]*nodesync.IPWithNetwork{ipn(t, "fd00::2/64")}, nodesync.IPv6)).To(Succeed())
	g.Expect(records(t, db)[2].GetIpAddresses()).To(Equal([]string{"192.168.16.2/24", "fd00::2/64"}))
	g.Expect(p.PublishNodeIPs([]*nodesync.IPWithNetwork{ipn(t, "192.168.17.2/24")}, nodesync.IPv4)).To(Succeed())
	g.Expect(records(t, db)[2].GetIpAddresses()).To(Equal([]string{"fd00::2/64", "192.168.17.2/24"}))

	// a bare address without a network is a host network
	g.Expect(p.PublishNodeIPs([]*nodesync.IPWithNetwork{{Address: net.ParseIP("fd00::9")}}, nodesync.IPv6)).To(Succeed())
	g.Expect(records(t, db)[2].GetIpAddresses()).To(Equal([]string{"192.168.17.2/24", "fd00::9/128"}))

	// a later resync whose kube state is older keeps the published addresses
	ks := api.KubeStateData{"vppnode": vppState(&vppnode.VppNode{Id: 2, Name: "node-x", IpAddresses: []string{"192.168.16.2/24"}})}
	g.Expect(p.Resync(&api.DBResync{Local: true, KubeState: ks}, ks, 2, nil)).To(Succeed())
	g.Expect(vppStrings(p.GetAllNodes()["node-x"])).To(Equal([]string{"192.168.17.2/24", "fd00::9/128"}))

	// a restarted agent finds its addresses: publishing them again writes nothing
	rev := revision(t, db, 2)
	g.Expect(p.Close()).To(Succeed(), "stopped first: a second live agent named node-x is refused")
	again := newPlugin(t, "node-x", db, &loop{})
	g.Expect(resync(again, nil)).To(Succeed())
	g.Expect(again.GetNodeID()).To(Equal(uint32(2)))
	g.Expect(again.PublishNodeIPs([]*nodesync.IPWithNetwork{ipn(t, "192.168.17.2/24")}, nodesync.IPv4)).To(Succeed())
	g.Expect(revision(t, db, 2)).To(Equal(rev))
}

func TestPublishNodeIPsErrors(t *testing.T) {
	g := NewWithT(t)
	v4 := []*nodesync.IPWithNetwork{ipn(t, "192.168.16.2/24")}

	noDB := newPlugin(t, "node-x", nil, &loop{})
	err := noDB.PublishNodeIPs(v4, nodesync.IPv4)
	g.Expect(errors.Is(err, nodesync.ErrNoDatabase)).To(BeTrue())
	g.Expect(err.Error()).To(Equal(`cannot publish the VPP addresses of node "node-x": database is not provided`))

	srv := etcdtest.Start(t)
	db := newDB(t, srv, shortTimeout)
	p := newPlugin(t, "node-x", db, &loop{})
	g.Expect(p.PublishNodeIPs(v4, nodesync.IPv4)).To(MatchError(nodesync.ErrNoNodeID), "before the claim")
	g.Expect(resync(p, nil)).To(Succeed())

	g.Expect(p.PublishNodeIPs(v4, nodesync.IPv6)).To(MatchError(ContainSubstring("address 192.168.16.2/24 is not IPv6")))
	g.Expect(p.PublishNodeIPs(v4, 5)).To(MatchError(ContainSubstring("IP version 5 is neither 4 nor 6")))
	g.Expect(p.PublishNodeIPs([]*nodesync.IPWithNetwork{nil}, nodesync.IPv4)).To(MatchError(ContainSubstring("address #0 is nil")))

	srv.Stop()
	err = p.PublishNodeIPs(v4, nodesync.IPv4)
	g.Expect(err).To(MatchError(ContainSubstring(`cannot publish the VPP addresses of node "node-x": writing "allocatedIDs/1"`)))
	g.Expect(p.GetAllNodes()["node-x"].VppIPAddresses).To(BeEmpty(), "nothing recorded when the write failed")
	srv.Restart()
	g.Eventually(func() error { return p.PublishNodeIPs(v4, nodesync.IPv4) }, 10*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Expect(records(t, db)[1].GetIpAddresses()).To(Equal([]string{"192.168.16.2/24"}))
}
