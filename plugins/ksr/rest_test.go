package ksr

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/infra/rest"
)

// serve runs one request against a handler of p.
func serve(p *Plugin, provider rest.HandlerProvider, method string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	provider(rest.NewFormatter(p.Log))(w, httptest.NewRequest(method, "/", nil))
	return w
}

// The status names this replica and the leader; a resync request is taken
// by the leader (202) and refused by a standby (409).
func TestStatusAndResyncEndpoints(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	client := fake.NewClientset(testNode("n1", "10.1.1.0/24"))
	a := startKSR(t, newDB(t, srv), client, "replica-a", testConfig())
	leading(t, a)
	b := startKSR(t, newDB(t, srv), client, "replica-b", testConfig())
	g.Eventually(func() bool { return b.status.get().Synced }).WithTimeout(5 * time.Second).Should(BeTrue())

	var s Status
	w := serve(b, b.statusHandler, http.MethodGet)
	g.Expect(w.Code).To(Equal(http.StatusOK))
	g.Expect(json.Unmarshal(w.Body.Bytes(), &s)).To(Succeed())
	g.Expect(s.Identity).To(Equal("replica-b"))
	g.Expect(s.Leader).To(Equal("replica-a"))
	g.Expect(s.Leading).To(BeFalse())
	g.Expect(s.PendingNodeIDReleases).NotTo(BeNil(), "an empty list, not null")

	w = serve(a, a.statusHandler, http.MethodGet)
	g.Expect(json.Unmarshal(w.Body.Bytes(), &s)).To(Succeed())
	g.Expect(s.Leading).To(BeTrue())
	g.Expect(s.LastResync.Mirrored).To(HaveKeyWithValue("node", 1))

	w = serve(b, b.resyncHandler, http.MethodPost)
	g.Expect(w.Code).To(Equal(http.StatusConflict))
	g.Expect(w.Body.String()).To(ContainSubstring("does not lead"))
	first := a.status.get().LastResync
	w = serve(a, a.resyncHandler, http.MethodPost)
	g.Expect(w.Code).To(Equal(http.StatusAccepted))
	g.Eventually(func() bool { return a.status.get().LastResync != first }).WithTimeout(5 * time.Second).Should(BeTrue())
}
