package etcd

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
)

// A List longer than a page is read in pages, all at the first page's
// revision: keys written and deleted between two pages are not in it (it
// is one snapshot), and a watch from its revision + 1 delivers them.
func TestListReadsPagesOfOneSnapshot(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	p := startPlugin(t, fastConfig(srv.Endpoint()), nil)
	ctx := t.Context()
	for i := range 10 {
		g.Expect(p.Put(ctx, fmt.Sprintf("/p/%02d", i), []byte{byte(i)})).To(Succeed())
	}
	g.Expect(p.Put(ctx, "/p0", []byte("beside the prefix"))).To(Succeed())
	g.Expect(p.Put(ctx, "/o", []byte("before it"))).To(Succeed())

	defer func(size int64) { listPageSize, listPageHook = size, nil }(listPageSize)
	listPageSize = 3
	pages := 0
	listPageHook = func() {
		pages++
		if pages == 1 {
			g.Expect(p.Put(context.Background(), "/p/99", []byte("later"))).To(Succeed())
			_, err := p.Delete(context.Background(), "/p/05")
			g.Expect(err).NotTo(HaveOccurred())
		}
	}
	kvs, rev, err := p.List(ctx, "/p/")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pages).To(Equal(3), "10 keys in pages of 3: 3 more after the first")
	var keys []string
	for _, kv := range kvs {
		keys = append(keys, kv.Key)
	}
	g.Expect(keys).To(Equal([]string{"/p/00", "/p/01", "/p/02", "/p/03", "/p/04", "/p/05", "/p/06", "/p/07", "/p/08", "/p/09"}),
		"the snapshot of the first page, in key order")
	g.Expect(kvs[5].Value).To(Equal([]byte{5}))

	ch, err := p.Watch(ctx, "/p/", rev+1)
	g.Expect(err).NotTo(HaveOccurred())
	var got []string
	for range 2 {
		ev := <-ch
		got = append(got, ev.Type.String()+" "+ev.Key)
	}
	g.Expect(got).To(Equal([]string{kvdb.EventPut.String() + " /p/99", kvdb.EventDelete.String() + " /p/05"}))

	listPageHook = nil
	all, _, err := p.List(ctx, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(all).To(HaveLen(12), "the whole keyspace in pages: 10 under /p/ less one, plus /p/99, /p0, /o")
}
