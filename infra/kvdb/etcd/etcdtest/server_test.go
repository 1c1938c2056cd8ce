package etcdtest

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestStopRestartKeepsDataAndPort(t *testing.T) {
	g := NewWithT(t)
	srv := Start(t)
	ep := srv.Endpoint()
	g.Expect(ep).To(MatchRegexp(`^127\.0\.0\.1:[1-9][0-9]*$`))
	g.Expect(ep).NotTo(HaveSuffix(":2379"))
	cli := srv.Client(t)
	_, err := cli.Put(t.Context(), "k", "v")
	g.Expect(err).NotTo(HaveOccurred())

	srv.Stop()
	srv.Stop() // idempotent
	srv.Restart()
	g.Expect(srv.Endpoint()).To(Equal(ep))
	resp, err := cli.Get(t.Context(), "k")
	g.Expect(err).NotTo(HaveOccurred(), "the same client reconnects")
	g.Expect(resp.Kvs).To(HaveLen(1))
	g.Expect(string(resp.Kvs[0].Value)).To(Equal("v"))
}
