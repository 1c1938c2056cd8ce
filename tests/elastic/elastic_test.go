package elastic

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// loadPods is how many containers the growth adds: more than the node's
// /28 (12 addresses) and one added /28 (14) hold.
const loadPods = 36

// loadClients is how many CNI clients add at once; each waits loadPace
// after each Add.
const (
	loadClients = 8
	loadPace    = 100 * time.Millisecond
)

// TestElasticGrowsAndShrinks fills a node with a /28 pod subnet past its
// first block with 8 concurrent CNI clients: added blocks arrive from the
// pool block server, no Add fails, the grant in etcd and GET
// /contiv/v1/ipam/pools agree. Then every container is deleted: the added
// blocks stay until addressCooldown + blockCooldown have passed, are never
// given back while an address of theirs is assigned or cooling, and then
// leave both the agent's pools and the grant.
func TestElasticGrowsAndShrinks(t *testing.T) {
	g := NewWithT(t)
	r := startRig(t)
	ctx := t.Context()
	first, err := pools(ctx, r.agent)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(first.Pools).To(HaveLen(1), "one pool before the load: %v", poolCIDRs(first))

	cids := make([]string, loadPods)
	for i := range cids {
		cids[i] = fmt.Sprintf("grow-%03d", i)
	}
	t.Cleanup(func() { logGrowth(t, r.agent) })
	addrs, _, errs := addAll(t, r.agent.Socket, cids, loadClients, loadPace)
	if len(errs) > 0 {
		t.Errorf("%d of %d Adds failed while %s had free blocks; first: %v", len(errs), len(cids), blockRange, errs[0])
	}

	g.Eventually(grantOf(ctx, r.cli, node)).WithTimeout(10*time.Second).Should(WithTransform(func(bs []string) int { return len(bs) }, BeNumerically(">=", 2)),
		"the grant of %s in etcd", node)
	granted, err := grantOf(ctx, r.cli, node)()
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() ([]string, error) {
		s, err := pools(ctx, r.agent)
		return poolCIDRs(s), err
	}).WithTimeout(10*time.Second).Should(Equal(append([]string{first.Pools[0].CIDR}, granted...)),
		"the agent's pools: its own subnet, then the granted blocks in grant order")
	st, err := pools(ctx, r.agent)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Assigned).To(BeNumerically("==", len(addrs)), "assigned addresses in /pools")
	rng := netip.MustParsePrefix(blockRange)
	for _, b := range granted {
		g.Expect(rng.Contains(netip.MustParsePrefix(b).Addr())).To(BeTrue(), "granted block %s in %s", b, blockRange)
	}
	seen := map[netip.Addr]string{}
	for cid, a := range addrs {
		g.Expect(seen).NotTo(HaveKey(a), "%s given to %s and %s", a, seen[a], cid)
		seen[a] = cid
		g.Expect(slices.ContainsFunc(poolCIDRs(st), func(p string) bool { return netip.MustParsePrefix(p).Contains(a) })).
			To(BeTrue(), "address %s of %s outside the pools %v", a, cid, poolCIDRs(st))
	}
	t.Logf("grown: pools %v, grant %v", poolCIDRs(st), granted)

	// Shrink.
	c := dialCNI(t, r.agent.Socket)
	defer c.close()
	deleteStart := time.Now()
	for cid := range addrs {
		g.Expect(c.del(cid)).To(Succeed())
	}
	deleteEnd := time.Now()
	earliest := deleteStart.Add(addressCooldown + blockCooldown)
	added := st.Pools[1:]
	lastBusy := map[string]time.Time{}
	goneAt := map[string]time.Time{}
	deadline := deleteEnd.Add(addressCooldown + blockCooldown + 5*time.Second)
	for len(goneAt) < len(added) && time.Now().Before(deadline) {
		s, err := pools(ctx, r.agent)
		now := time.Now()
		g.Expect(err).NotTo(HaveOccurred())
		present := map[string]bool{}
		for _, p := range s.Pools[1:] {
			present[p.CIDR] = true
			g.Expect(goneAt).NotTo(HaveKey(p.CIDR), "block %s back in the pools after it was given back", p.CIDR)
			if p.Assigned > 0 || p.Cooldown > 0 {
				lastBusy[p.CIDR] = now
			}
		}
		for _, p := range added {
			if present[p.CIDR] {
				continue
			}
			if _, ok := goneAt[p.CIDR]; !ok {
				goneAt[p.CIDR] = now
				g.Expect(now).To(BeTemporally(">=", earliest),
					"block %s given back %s after the first Delete; want >= addressCooldown + blockCooldown (%s)",
					p.CIDR, now.Sub(deleteStart), addressCooldown+blockCooldown)
				g.Expect(now.Sub(lastBusy[p.CIDR])).To(BeNumerically(">=", blockCooldown),
					"block %s given back %s after it was last seen with an assigned or cooling address",
					p.CIDR, now.Sub(lastBusy[p.CIDR]))
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	g.Expect(goneAt).To(HaveLen(len(added)), "added blocks given back within addressCooldown + blockCooldown + 5 s of the last Delete")
	for b, at := range goneAt {
		t.Logf("block %s given back %s after the first Delete (%s after the last)", b,
			at.Sub(deleteStart).Round(time.Millisecond), at.Sub(deleteEnd).Round(time.Millisecond))
	}
	g.Eventually(grantOf(ctx, r.cli, node)).WithTimeout(10*time.Second).Should(BeEmpty(),
		"the grant of %s once the blocks are given back", node)
	all, err := grants(ctx, r.cli)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(doubleGranted(all)).To(BeEmpty())
}

// TestElasticBurstOutrunsTheGrant: 8 CNI clients adding at once,
// unpaced, use up the warm target's 4 addresses in the ~10-20 ms from the
// claim to the added pool; an Add that finds the node's blocks full while
// a claim is pending is answered "try again later" (code 11), which the
// clients repeat as contiv-cni does, so that no Add fails while the range
// has free blocks.
func TestElasticBurstOutrunsTheGrant(t *testing.T) {
	r := startRig(t)
	cids := make([]string, loadPods)
	for i := range cids {
		cids[i] = fmt.Sprintf("burst-%03d", i)
	}
	t.Cleanup(func() { logGrowth(t, r.agent) })
	_, _, errs := addAll(t, r.agent.Socket, cids, loadClients, 0)
	if len(errs) > 0 {
		t.Errorf("%d of %d Adds failed while %s had free blocks; first: %v", len(errs), len(cids), blockRange, errs[0])
	}
}
