//go:build !contiv_noembed

package embedded

import (
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestCheckLoopback(t *testing.T) {
	cases := []struct{ url, wantErr string }{
		{"http://127.0.0.1:2379", ""},
		{"http://127.0.0.2:0", ""},
		{"http://[::1]:2380", ""},
		{"http://0.0.0.0:2379", "loopback"},
		{"http://10.1.2.3:2379", "loopback"},
		{"http://localhost:2379", "loopback IP"},
		{"https://127.0.0.1:2379", "scheme must be http"},
		{"http://127.0.0.1", "port"},
		{"http://127.0.0.1:2379/x", "path"},
		{"::", "invalid URL"},
	}
	for _, tc := range cases {
		t.Run(tc.url, func(t *testing.T) {
			g := NewWithT(t)
			err := CheckLoopback(tc.url)
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
			g.Expect(err).To(MatchError(ContainSubstring(tc.url)))
		})
	}
}

func TestStartRestartSamePorts(t *testing.T) {
	g := NewWithT(t)
	dir := filepath.Join(t.TempDir(), "etcd")
	cfg := Config{Dir: dir, ClientURL: "http://127.0.0.1:0", PeerURL: "http://127.0.0.1:0", UnsafeNoFsync: true}
	s, err := Start(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.ClientURL()).To(MatchRegexp(`^http://127\.0\.0\.1:[1-9][0-9]*$`))
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Endpoint()}, DialTimeout: time.Second})
	g.Expect(err).NotTo(HaveOccurred())
	defer cli.Close()
	_, err = cli.Put(t.Context(), "k", "v")
	g.Expect(err).NotTo(HaveOccurred())

	start := time.Now()
	s.Close()
	t.Logf("close took %s", time.Since(start))
	start = time.Now()
	s2, err := Start(Config{Dir: dir, ClientURL: s.ClientURL(), PeerURL: s.PeerURL(), UnsafeNoFsync: true})
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("restart took %s", time.Since(start))
	defer s2.Close()
	g.Expect(s2.ClientURL()).To(Equal(s.ClientURL()))
	resp, err := cli.Get(t.Context(), "k") // the old client reconnects
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.Kvs).To(HaveLen(1), "data survives the restart")
}

func TestStartRejectsNonLoopback(t *testing.T) {
	g := NewWithT(t)
	_, err := Start(Config{Dir: t.TempDir(), ClientURL: "http://0.0.0.0:0", PeerURL: "http://127.0.0.1:0"})
	g.Expect(err).To(MatchError(ContainSubstring("loopback")))
}
