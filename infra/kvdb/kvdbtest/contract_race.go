package kvdbtest

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/kvdb"
)

// testCASRace increments one counter from 2 clients x 16 goroutines with
// Get + CompareAndSwap retry loops; no increment may be lost.
func testCASRace(t *testing.T, a, b kvdb.Broker) {
	const goroutines, increments = 16, 8
	g := NewWithT(t)
	ctx := t.Context()
	g.Expect(a.Put(ctx, "counter", []byte("0"))).To(Succeed())

	var retries atomic.Int64
	errs := runWriters([]kvdb.Broker{a, b}, goroutines, func(br kvdb.Broker, _ string) error {
		for range increments {
			for {
				kv, found, err := br.Get(ctx, "counter")
				if err != nil || !found {
					return fmt.Errorf("get counter: found=%v: %w", found, err)
				}
				n, err := strconv.Atoi(string(kv.Value))
				if err != nil {
					return err
				}
				ok, err := kvdb.CompareAndSwap(ctx, br, "counter", kv.Value, []byte(strconv.Itoa(n+1)))
				if err != nil {
					return err
				}
				if ok {
					break
				}
				retries.Add(1)
			}
		}
		return nil
	})
	g.Expect(<-errs).To(BeEmpty())
	g.Expect(string(mustGet(ctx, g, b, "counter").Value)).To(Equal(strconv.Itoa(2 * goroutines * increments)))
	t.Logf("%d CAS retries", retries.Load())
}

// testPutIfAbsentRace lets 2 clients x 16 goroutines race to create one
// key; exactly one wins and its value is stored.
func testPutIfAbsentRace(t *testing.T, a, b kvdb.Broker) {
	const goroutines = 16
	g := NewWithT(t)
	ctx := t.Context()
	var (
		wins   atomic.Int64
		winner atomic.Value
	)
	errs := runWriters([]kvdb.Broker{a, b}, goroutines, func(br kvdb.Broker, name string) error {
		created, err := kvdb.PutIfAbsent(ctx, br, "leader", []byte(name))
		if created {
			wins.Add(1)
			winner.Store(name)
		}
		return err
	})
	g.Expect(<-errs).To(BeEmpty())
	g.Expect(wins.Load()).To(BeEquivalentTo(1))
	g.Expect(string(mustGet(ctx, g, a, "leader").Value)).To(Equal(winner.Load()))
}
