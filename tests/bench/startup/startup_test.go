package startup

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/tests/bench/internal/agentproc"
)

// TestSetup checks the pieces of a timed start without the agent: the
// config directory of each etcd mode, the readiness poll (it stops at the
// first 200, not earlier, and gives up when the process exits) and the
// percentiles reported.
func TestSetup(t *testing.T) {
	g := NewWithT(t)

	dir := t.TempDir()
	g.Expect(writeConfig(dir, "")).To(Succeed())
	etcdConf, err := os.ReadFile(filepath.Join(dir, "etcd.conf"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(etcdConf)).To(ContainSubstring("embedded: true"))
	g.Expect(string(etcdConf)).To(ContainSubstring(filepath.Join(dir, "etcd")), "etcd data in the start's directory")
	g.Expect(writeConfig(dir, "127.0.0.1:23790")).To(Succeed())
	etcdConf, err = os.ReadFile(filepath.Join(dir, "etcd.conf"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(etcdConf)).To(Equal("endpoints: [\"127.0.0.1:23790\"]\n"))

	var gets atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readiness" || gets.Add(1) < 5 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	polls, err := agentproc.PollReady(srv.URL, nil, time.After(10*time.Second))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(polls).To(Equal(5), "ready at the fifth GET")

	done := make(chan error, 1)
	done <- nil
	never := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer never.Close()
	_, err = agentproc.PollReady(never.URL, done, time.After(10*time.Second))
	g.Expect(err).To(MatchError(agentproc.ErrExited))

	lat := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	g.Expect(percentile(lat, 0.5)).To(Equal(time.Duration(5)))
	g.Expect(percentile(lat, 0.99)).To(Equal(time.Duration(10)))
	g.Expect(percentile(nil, 0.5)).To(BeZero())
}
