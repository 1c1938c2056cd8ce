package ksr

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	mirrormodel "github.com/contiv-ipam/agent/plugins/ksr/model/mirror"
)

// storedMarker is the mirror marker in etcd (false: none).
func storedMarker(t *testing.T, srv *etcdtest.Server) (mirrormodel.Marker, bool) {
	t.Helper()
	resp, err := srv.Client(t).Get(t.Context(), markerKey)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return mirrormodel.Marker{}, false
	}
	m, err := mirrormodel.Parse(resp.Kvs[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	return m, true
}

// The leader writes the mirror marker once its mirror is complete (the
// pods it holds counted), then every heartbeat, each after the last.
func TestTheLeaderWritesTheMirrorMarkerEveryHeartbeat(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	client := fake.NewClientset(testPod("default", "p1", "10.1.1.2"), testPod("default", "p2", "10.1.1.3"))
	cfg := testConfig()
	cfg.MirrorHeartbeat = 100 * time.Millisecond
	a := startKSR(t, newDB(t, srv), client, "a", cfg)
	leading(t, a)
	var first mirrormodel.Marker
	g.Eventually(func() bool {
		var ok bool
		first, ok = storedMarker(t, srv)
		return ok
	}).WithTimeout(5 * time.Second).Should(BeTrue())
	g.Expect(first.Leader).To(Equal("a"))
	g.Expect(first.Pods).To(Equal(2))
	g.Expect(first.Interval).To(Equal("100ms"))
	g.Eventually(func() time.Time { m, _ := storedMarker(t, srv); return m.Heartbeat }).WithTimeout(5 * time.Second).
		Should(BeTemporally(">", first.Heartbeat))
	g.Expect(a.status.get().MirrorMarker).NotTo(BeNil())
}

// A leader whose clock is behind the marker a previous leader left
// writes heartbeats after it: agents ignore a marker older than the
// newest they saw.
func TestANewLeaderBeatsAfterThePreviousMarker(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	ahead := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	old := mirrormodel.Marker{Leader: "gone", Heartbeat: ahead, Interval: "10s"}
	_, err := srv.Client(t).Put(t.Context(), markerKey, string(old.Encode()))
	g.Expect(err).NotTo(HaveOccurred())
	cfg := testConfig()
	cfg.MirrorHeartbeat = 100 * time.Millisecond
	a := startKSR(t, newDB(t, srv), fake.NewClientset(), "a", cfg)
	leading(t, a)
	g.Eventually(func() string { m, _ := storedMarker(t, srv); return m.Leader }).WithTimeout(5 * time.Second).Should(Equal("a"))
	m, _ := storedMarker(t, srv)
	g.Expect(m.Heartbeat).To(BeTemporally(">", ahead))
}
