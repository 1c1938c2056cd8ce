package crash

import (
	"context"
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/podmanager"
	"github.com/contiv-ipam/agent/plugins/podmanager/cni"
	"github.com/contiv-ipam/agent/tests/testenv"
)

// resvNetwork is the network of the reservation tests' keys.
const resvNetwork = "resvnet"

// resvSlack is how far from its deadline a reservation may end.
const resvSlack = time.Second

// resvIPAMConf is crashIPAMConf with the CNI reservation timeout.
func resvIPAMConf(timeout time.Duration) string {
	return crashIPAMConf + "cniReservationTimeout: " + timeout.String() + "\n"
}

// resvClient calls the agent's RemoteCNI service the way contiv-cni does,
// and can stop where a contiv-cni killed mid-ADD stops: after Add, before
// Confirm.
type resvClient struct {
	t  *testing.T
	rc cni.RemoteCNIClient
}

func newResvClient(t *testing.T, a *testenv.Agent) *resvClient {
	t.Helper()
	conn, err := dial(a.Socket)
	if err != nil {
		t.Fatalf("dial %s: %v", a.Socket, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &resvClient{t: t, rc: cni.NewRemoteCNIClient(conn)}
}

func resvKey(id string) podmanager.AttachmentKey {
	return podmanager.AttachmentKey{Network: resvNetwork, ContainerID: id, IfName: ifName}
}

// add calls Add for a plain container (confirms: the client's promise to
// Confirm) and returns the reply's addresses and reservation.
func (c *resvClient) add(id string, confirms bool) ([]string, string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	req := request(resvKey(id), "")
	req.Confirms = confirms
	reply, err := c.rc.Add(ctx, req)
	if err == nil {
		err = replyError(reply)
	}
	if err != nil {
		c.t.Fatalf("Add %s: %v", id, err)
	}
	var addrs []string
	for _, ifc := range reply.GetInterfaces() {
		for _, ip := range ifc.GetIpAddresses() {
			p, err := netip.ParsePrefix(ip.GetAddress())
			if err != nil {
				c.t.Fatalf("Add %s: address %q: %v", id, ip.GetAddress(), err)
			}
			addrs = append(addrs, p.Addr().String())
		}
	}
	if len(addrs) != 2 {
		c.t.Fatalf("Add %s on a dual-stack node: addresses %v, want two", id, addrs)
	}
	return addrs, reply.GetReservation()
}

// confirm calls Confirm; the error is the agent's ERROR reply, if any.
func (c *resvClient) confirm(id, reservation string) error {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	k := resvKey(id)
	reply, err := c.rc.Confirm(ctx, &cni.ConfirmRequest{Version: "1.1.0", ContainerId: k.ContainerID,
		InterfaceName: k.IfName, NetworkName: k.Network, Reservation: reservation})
	if err != nil {
		c.t.Fatalf("Confirm %s: %v", id, err)
	}
	return replyError(reply)
}

// resvHolding is what a key holds over REST: its addresses (nil when
// none) and its reservation deadline ("" when none).
type resvHolding struct {
	addrs    []string
	deadline string
}

// holdings reads GET /contiv/v1/ipam/allocations: every key of
// resvNetwork and what it holds.
func holdings(t *testing.T, a *testenv.Agent) map[string]resvHolding {
	t.Helper()
	code, body := a.Get(t, "/contiv/v1/ipam/allocations")
	if code != 200 {
		t.Fatalf("GET /contiv/v1/ipam/allocations: %d %s", code, body)
	}
	var out struct {
		Pods []struct {
			MainIP              string   `json:"MainIP"`
			IPs                 []string `json:"IPs"`
			Network             string   `json:"network"`
			ContainerID         string   `json:"containerId"`
			ReservationDeadline string   `json:"reservationDeadline"`
		} `json:"Pods"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("GET /contiv/v1/ipam/allocations: %v in %s", err, body)
	}
	m := map[string]resvHolding{}
	for _, p := range out.Pods {
		if p.Network != resvNetwork {
			continue
		}
		addrs := p.IPs
		if len(addrs) == 0 {
			addrs = []string{p.MainIP}
		}
		m[p.ContainerID] = resvHolding{addrs: addrs, deadline: p.ReservationDeadline}
	}
	return m
}

// restart SIGKILLs the agent and starts it again on its directory; it
// returns how long that took.
func restart(t *testing.T, a *testenv.Agent) time.Duration {
	t.Helper()
	start := time.Now()
	a.Kill(t)
	a.Start(t)
	return time.Since(start)
}

// TestReservationRestart: the deadline of an unconfirmed CNI reservation
// is stored with its allocation, so a SIGKILLed agent keeps it.
//
//   - before the deadline: an agent (cniReservationTimeout 8s) restarted
//     before the deadline still holds the unconfirmed allocation, both
//     addresses and the same deadline, and its reservation can still be
//     confirmed; at the deadline (± 1s) it releases the unconfirmed one;
//     the confirmed ones (Confirm before or after the restart, and an Add
//     without confirms) are held past the deadline and across another
//     SIGKILL, and the expired one stays released.
//   - expired while down: an agent (timeout 1s) killed at once and
//     restarted after the deadline (the test keeps it down until then)
//     releases the unconfirmed allocation within 1s of being ready and
//     keeps the confirmed one.
func TestReservationRestart(t *testing.T) {
	t.Run("before the deadline", func(t *testing.T) {
		t.Parallel()
		reservationBeforeDeadline(t)
	})
	t.Run("expired while down", func(t *testing.T) {
		t.Parallel()
		reservationExpiredWhileDown(t)
	})
}

func reservationBeforeDeadline(t *testing.T) {
	const timeout = 8 * time.Second
	g := NewWithT(t)
	a := testenv.StartAgent(t, testenv.Options{Conf: map[string]string{
		"contiv.conf": testenv.DualStackConf(t), "ipam.conf": resvIPAMConf(timeout)}})
	c := newResvClient(t, a)

	pendingAddrs, pendingResv := c.add("pending", true)
	replied := time.Now()
	lateAddrs, lateResv := c.add("late", true)
	confirmedAddrs, confirmedResv := c.add("confirmed", true)
	g.Expect(c.confirm("confirmed", confirmedResv)).To(Succeed())
	legacyAddrs, legacyResv := c.add("legacy", false)
	g.Expect([]string{pendingResv, lateResv, confirmedResv}).NotTo(ContainElement(""), "Adds with confirms are reserved")
	g.Expect(legacyResv).To(BeEmpty(), "an Add without confirms is not reserved")

	before := holdings(t, a)
	g.Expect(before["pending"].deadline).NotTo(BeEmpty())
	deadline, err := time.Parse(time.RFC3339Nano, before["pending"].deadline)
	g.Expect(err).NotTo(HaveOccurred())
	want := map[string]resvHolding{
		"pending":   {pendingAddrs, before["pending"].deadline},
		"late":      {lateAddrs, before["late"].deadline},
		"confirmed": {confirmedAddrs, ""},
		"legacy":    {legacyAddrs, ""},
	}
	g.Expect(before).To(Equal(want), "before the kill")

	took := restart(t, a)
	t.Logf("SIGKILL and restart took %v; the deadline is %v after the Add", took.Round(time.Millisecond), timeout)
	if time.Now().After(deadline.Add(-resvSlack)) {
		t.Fatalf("the restart took %v: the agent was ready less than %v before the deadline, too late to tell a kept reservation from a lost one", took, resvSlack)
	}
	g.Expect(holdings(t, a)).To(Equal(want), "after SIGKILL and restart, before the deadline: the same addresses and deadlines")

	// contiv-cni's Confirm that arrives after the restart still matches.
	g.Expect(c.confirm("late", lateResv)).To(Succeed(), "Confirm after the restart")
	want["late"] = resvHolding{lateAddrs, ""}
	g.Expect(holdings(t, a)).To(Equal(want))

	g.Eventually(func() map[string]resvHolding { return holdings(t, a) }).
		WithTimeout(time.Until(deadline.Add(resvSlack))).WithPolling(20*time.Millisecond).
		ShouldNot(HaveKey("pending"), "the unconfirmed reservation (deadline %s)", deadline.Format(time.RFC3339Nano))
	t.Logf("the unconfirmed reservation was released %v after the Add's reply (timeout %v; an agent restart in between)",
		time.Since(replied).Round(time.Millisecond), timeout)
	g.Expect(time.Now()).To(BeTemporally(">=", deadline.Add(-resvSlack)), "released before its deadline")
	delete(want, "pending")
	g.Expect(holdings(t, a)).To(Equal(want), "after the deadline")
	g.Expect(c.confirm("pending", pendingResv)).To(MatchError(ContainSubstring("code 102")), "Confirm after the expiry")

	took = restart(t, a)
	t.Logf("second SIGKILL and restart took %v", took.Round(time.Millisecond))
	g.Expect(holdings(t, a)).To(Equal(want), "after the second SIGKILL and restart")
	expectCleanLog(t, a)
}

func reservationExpiredWhileDown(t *testing.T) {
	const timeout = time.Second
	g := NewWithT(t)
	a := testenv.StartAgent(t, testenv.Options{Conf: map[string]string{
		"contiv.conf": testenv.DualStackConf(t), "ipam.conf": resvIPAMConf(timeout)}})
	c := newResvClient(t, a)

	confirmedAddrs, confirmedResv := c.add("confirmed", true)
	g.Expect(c.confirm("confirmed", confirmedResv)).To(Succeed())
	_, pendingResv := c.add("pending", true)
	g.Expect(pendingResv).NotTo(BeEmpty())
	deadline, err := time.Parse(time.RFC3339Nano, holdings(t, a)["pending"].deadline)
	g.Expect(err).NotTo(HaveOccurred(), "the pending reservation's deadline")

	// The agent stays down past the deadline: a restart takes its killed
	// predecessor's presence over at once, so it is the test that waits
	// (wall-clock time that must pass, not a synchronisation).
	a.Kill(t)
	time.Sleep(time.Until(deadline) + 100*time.Millisecond)
	a.Start(t)
	ready := time.Now()
	t.Logf("the agent was ready %v after the deadline (%v after the Add)", ready.Sub(deadline).Round(time.Millisecond), timeout)
	want := map[string]resvHolding{"confirmed": {confirmedAddrs, ""}}
	g.Eventually(func() map[string]resvHolding { return holdings(t, a) }).
		WithTimeout(resvSlack).WithPolling(20*time.Millisecond).
		Should(Equal(want), "the reservation that ended while the agent was down is released, the confirmed one kept")
	t.Logf("released %v after the agent was ready", time.Since(ready).Round(time.Millisecond))
	expectCleanLog(t, a)
}

// expectCleanLog: the agent logged no error, panic or fatal line.
func expectCleanLog(t *testing.T, a *testenv.Agent) {
	t.Helper()
	if hits := a.LogMentions(t, `"level":"ERROR"`, "panic", "fatal"); len(hits) > 0 {
		t.Errorf("the agent logged errors (log in %s):\n%s", a.LogPath(), strings.Join(hits, "\n"))
	}
}
