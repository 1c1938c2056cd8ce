package elastic

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// benchPods are the containers of one phase: the node's /28 and four
// added /28s hold them.
const benchPods = 60

// timedAdds adds cids from loadClients clients paced by loadPace (spread
// evenly) and returns each Add's latency; an Add that fails fails b.
func timedAdds(b *testing.B, socket string, cids []string) []time.Duration {
	var mu sync.Mutex
	var lat []time.Duration
	next := make(chan string)
	var wg sync.WaitGroup
	for w := range loadClients {
		c := dialCNI(b, socket)
		wg.Go(func() {
			defer c.close()
			time.Sleep(time.Duration(w) * loadPace / loadClients)
			for cid := range next {
				start := time.Now()
				_, err := c.add(cid)
				d := time.Since(start)
				mu.Lock()
				if err != nil {
					b.Error(err)
				}
				lat = append(lat, d)
				mu.Unlock()
				time.Sleep(loadPace)
			}
		})
	}
	for _, cid := range cids {
		next <- cid
	}
	close(next)
	wg.Wait()
	return lat
}

// p99 is the 99th percentile (nearest rank) of ds in ms.
func p99(ds []time.Duration) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (99*len(s) + 99) / 100
	return float64(s[max(i-1, 0)]) / float64(time.Millisecond)
}

// median of xs.
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkElasticGrowth grows a node from its /28 under 8 paced CNI
// clients (benchPods Adds) and reads from the agent's log, per warm-target
// crossing, the time to the claim written and to the granted pool added
// (usable); then deletes every container, waits out the address cooldown
// and adds benchPods again into the blocks already held (steady state: no
// crossing). Reported: the medians of claim-ms and usable-ms, the Add p99
// of each phase and their ratio.
func BenchmarkElasticGrowth(b *testing.B) {
	b.Run("impl=contiv", func(b *testing.B) {
		for range b.N {
			benchGrowth(b)
		}
	})
}

func benchGrowth(b *testing.B) {
	b.StopTimer()
	r := startRig(b)
	grow := make([]string, benchPods)
	steady := make([]string, benchPods)
	for i := range grow {
		grow[i], steady[i] = fmt.Sprintf("grow-%03d", i), fmt.Sprintf("steady-%03d", i)
	}
	b.StartTimer()
	growLat := timedAdds(b, r.agent.Socket, grow)
	b.StopTimer()

	var claim, usable []float64
	var crossed time.Time
	for _, rec := range logged(b, r.agent.Log, growthMsgs[:3]...) {
		switch rec.Msg {
		case growthMsgs[0]:
			crossed = rec.Time
		case growthMsgs[1]:
			if !crossed.IsZero() {
				claim = append(claim, float64(rec.Time.Sub(crossed))/float64(time.Millisecond))
			}
		case growthMsgs[2]:
			if !crossed.IsZero() {
				usable = append(usable, float64(rec.Time.Sub(crossed))/float64(time.Millisecond))
				crossed = time.Time{}
			}
		}
	}
	if len(usable) == 0 {
		b.Fatalf("no pool added during the growth; agent log %s", r.agent.Log)
	}

	c := dialCNI(b, r.agent.Socket)
	for _, cid := range grow {
		if err := c.del(cid); err != nil {
			b.Fatal(err)
		}
	}
	c.close()
	time.Sleep(addressCooldown + 200*time.Millisecond)
	added := len(logged(b, r.agent.Log, growthMsgs[2]))
	steadyLat := timedAdds(b, r.agent.Socket, steady)
	if n := len(logged(b, r.agent.Log, growthMsgs[2])); n != added {
		b.Logf("the steady phase added %d pools", n-added)
	}
	b.ReportMetric(median(claim), "claim-ms")
	b.ReportMetric(median(usable), "usable-ms")
	b.ReportMetric(float64(len(usable)), "blocks-added")
	b.ReportMetric(p99(growLat), "growth-p99-ms")
	b.ReportMetric(p99(steadyLat), "steady-p99-ms")
	b.ReportMetric(p99(growLat)/p99(steadyLat), "growth-over-steady-p99")
}
