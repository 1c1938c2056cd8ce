package cni

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	cnicodes "github.com/contiv-ipam/agent/plugins/podmanager/cni"
	"github.com/contiv-ipam/agent/tests/testenv"
)

// reservationTimeout is cniReservationTimeout of TestReservationExpiry.
const reservationTimeout = 2 * time.Second

// reservationSlack is how far from its deadline a reservation may end.
const reservationSlack = time.Second

// ipamConfWith is conf/ipam.conf with a top-level key set to value (the
// line replaced, or added when the sample has none).
func ipamConfWith(t testing.TB, key, value string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "conf", "ipam.conf"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	set := false
	for i, l := range lines {
		if strings.HasPrefix(l, key+":") {
			lines[i], set = key+": "+value, true
		}
	}
	if !set {
		lines = append(lines, key+": "+value)
	}
	return strings.Join(lines, "\n") + "\n"
}

// agentClient is a client of the agent's RemoteCNI service, as
// contiv-cni is: it lets a test stop where a dead contiv-cni stops (after
// Add, before Confirm).
type agentClient struct {
	rc      cnicodes.RemoteCNIClient
	network string
}

func newAgentClient(t *testing.T, socket, network string) *agentClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial %s: %v", socket, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &agentClient{rc: cnicodes.NewRemoteCNIClient(conn), network: network}
}

// request is contiv-cni's request for a plain container of the network.
func (c *agentClient) request(containerID string) *cnicodes.CNIRequest {
	return &cnicodes.CNIRequest{
		Version:          "1.1.0",
		ContainerId:      containerID,
		NetworkNamespace: "/var/run/netns/" + containerID,
		InterfaceName:    "eth0",
		ExtraNwConfig:    fmt.Sprintf(`{"cniVersion":"1.1.0","name":%q,"type":"contiv-cni"}`, c.network),
		NetworkName:      c.network,
	}
}

// rawAdd calls Add (confirms: the promise contiv-cni makes) and returns
// the reply; a transport error fails the test.
func (c *agentClient) rawAdd(t *testing.T, containerID string, confirms bool) *cnicodes.CNIReply {
	t.Helper()
	req := c.request(containerID)
	req.Confirms = confirms
	reply, err := c.rc.Add(ctxT(t), req)
	if err != nil {
		t.Fatalf("Add %s: %v", containerID, err)
	}
	return reply
}

// add is rawAdd returning the reply's addresses and reservation; an
// ERROR reply fails the test.
func (c *agentClient) add(t *testing.T, containerID string, confirms bool) (addrs []netip.Prefix, reservation string) {
	t.Helper()
	reply := c.rawAdd(t, containerID, confirms)
	if reply.GetResult() != cnicodes.CNIReply_OK {
		t.Fatalf("Add %s: code %d: %s", containerID, reply.GetErrorCode(), reply.GetError())
	}
	for _, ifc := range reply.GetInterfaces() {
		for _, ip := range ifc.GetIpAddresses() {
			p, err := netip.ParsePrefix(ip.GetAddress())
			if err != nil {
				t.Fatalf("Add %s: address %q: %v", containerID, ip.GetAddress(), err)
			}
			addrs = append(addrs, p)
		}
	}
	return addrs, reply.GetReservation()
}

// confirm calls Confirm and returns the reply.
func (c *agentClient) confirm(t *testing.T, containerID, reservation string) *cnicodes.CNIReply {
	t.Helper()
	reply, err := c.rc.Confirm(ctxT(t), &cnicodes.ConfirmRequest{Version: "1.1.0", ContainerId: containerID,
		InterfaceName: "eth0", NetworkName: c.network, Reservation: reservation})
	if err != nil {
		t.Fatalf("Confirm %s %s: %v", containerID, reservation, err)
	}
	return reply
}

// status calls Status and returns the reply.
func (c *agentClient) status(t *testing.T) *cnicodes.CNIReply {
	t.Helper()
	reply, err := c.rc.Status(ctxT(t), &cnicodes.StatusRequest{Version: "1.1.0", NetworkName: c.network})
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	return reply
}

// remove calls Delete; an ERROR reply fails the test.
func (c *agentClient) remove(t *testing.T, containerID string) {
	t.Helper()
	reply, err := c.rc.Delete(ctxT(t), c.request(containerID))
	if err != nil || reply.GetResult() != cnicodes.CNIReply_OK {
		t.Fatalf("Delete %s: %v %d %s", containerID, err, reply.GetErrorCode(), reply.GetError())
	}
}

// held is what the key holds over REST (nil when nothing) and its
// reservation deadline.
func held(t testing.TB, a *testenv.Agent, network, containerID string) ([]string, string) {
	t.Helper()
	al, ok := restAllocationOf(t, a, network, containerID, "eth0")
	if !ok {
		return nil, ""
	}
	return al.addrs(), al.ReservationDeadline
}

// addrStrings are the addresses without their lengths.
func addrStrings(ps []netip.Prefix) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Addr().String()
	}
	return out
}

// TestReservationExpiry: an agent with cniReservationTimeout 2s (ipam.conf)
// on a dual-stack node, real time.
//   - An Add with confirms that is never confirmed (what a contiv-cni
//     killed between the agent's reply and its Confirm leaves) shows its
//     deadline over REST and loses both addresses within 2s ± 1s of the
//     reply; a Confirm after that is code 102.
//   - An Add confirmed with Confirm, an Add without confirms (an older
//     contiv-cni) and a real contiv-cni ADD (which confirms) hold their
//     addresses until twice the timeout, with no deadline.
//   - A repeated Add of a reserved key gets the same addresses and a new
//     reservation; the first one can no longer be confirmed (102).
//   - Unconfirmed Adds that fill the pool make the next Add 101 and
//     STATUS 50 until they expire; then STATUS passes and an Add gets
//     addresses again (nothing leaks).
func TestReservationExpiry(t *testing.T) {
	g := NewWithT(t)
	n := startDualStack(t, ipamConfWith(t, "cniReservationTimeout", reservationTimeout.String()))
	network := uniqueName("resv")
	c := newAgentClient(t, n.agent.Socket, network)
	lost, kept, legacyKey, again := uniqueName("lost"), uniqueName("kept"), uniqueName("legacy"), uniqueName("again")

	start := time.Now()
	lostAddrs, lostResv := c.add(t, lost, true)
	replied := time.Now()
	g.Expect(lostAddrs).To(HaveLen(2), "a dual-stack Add")
	g.Expect(lostResv).NotTo(BeEmpty(), "an Add with confirms is reserved")
	addrs, deadline := held(t, n.agent, network, lost)
	g.Expect(addrs).To(Equal(addrStrings(lostAddrs)))
	d, err := time.Parse(time.RFC3339Nano, deadline)
	g.Expect(err).NotTo(HaveOccurred(), "reservationDeadline %q", deadline)
	g.Expect(d).To(BeTemporally(">=", start.Add(reservationTimeout).Add(-10*time.Millisecond)), "the deadline")
	g.Expect(d).To(BeTemporally("<=", replied.Add(reservationTimeout).Add(10*time.Millisecond)), "the deadline")

	keptAddrs, keptResv := c.add(t, kept, true)
	g.Expect(keptResv).NotTo(BeEmpty())
	reply := c.confirm(t, kept, keptResv)
	g.Expect(reply.GetResult()).To(Equal(cnicodes.CNIReply_OK), "Confirm: %d %s", reply.GetErrorCode(), reply.GetError())
	legacyAddrs, legacyResv := c.add(t, legacyKey, false)
	g.Expect(legacyResv).To(BeEmpty(), "an Add without confirms is not reserved")

	// A real contiv-cni ADD on the same agent: it confirms.
	rt, att := newRuntime(t), attachment(t, "cni")
	list := conflist(t, "1.1.0", uniqueName("resv-cni"), pluginMode(n.agent.Socket))
	res, err := rt.AddNetworkList(ctxT(t), list, att)
	g.Expect(err).NotTo(HaveOccurred(), "ADD through contiv-cni")
	cniV4, cniV6 := n.checkDualIPs(g, "1.1.0", resultJSON(t, res), true)
	expectHeldConfirmed(t, g, n.agent, list.Name, att, cniV4, cniV6)
	res, err = rt.AddNetworkList(ctxT(t), list, att)
	g.Expect(err).NotTo(HaveOccurred(), "repeated ADD of a confirmed key through contiv-cni")
	a4, a6 := n.checkDualIPs(g, "1.1.0", resultJSON(t, res), true)
	g.Expect([]netip.Prefix{a4, a6}).To(Equal([]netip.Prefix{cniV4, cniV6}))
	expectHeldConfirmed(t, g, n.agent, list.Name, att, cniV4, cniV6)

	// A repeated Add of a reserved key: a new reservation replaces it.
	againAddrs, first := c.add(t, again, true)
	againAddrs2, second := c.add(t, again, true)
	g.Expect(againAddrs2).To(Equal(againAddrs), "repeated Add, same key")
	g.Expect(second).NotTo(BeEmpty())
	g.Expect(second).NotTo(Equal(first), "a repeated Add of a reserved key gets a new reservation")
	reply = c.confirm(t, again, first)
	g.Expect(reply.GetErrorCode()).To(Equal(cnicodes.CodeBadRequest), "Confirm of a replaced reservation: %s", reply.GetError())
	reply = c.confirm(t, again, second)
	g.Expect(reply.GetResult()).To(Equal(cnicodes.CNIReply_OK), "Confirm of the current reservation: %s", reply.GetError())

	for _, k := range []struct {
		id    string
		addrs []netip.Prefix
	}{{kept, keptAddrs}, {legacyKey, legacyAddrs}, {again, againAddrs}} {
		addrs, deadline := held(t, n.agent, network, k.id)
		g.Expect(addrs).To(Equal(addrStrings(k.addrs)), "%s", k.id)
		g.Expect(deadline).To(BeEmpty(), "%s does not expire", k.id)
	}

	// Unconfirmed Adds fill the rest of the /28 (12 pod addresses): the
	// next Add is 101 until they expire; then an Add gets an address.
	var fillers []string
	for len(fillers) <= 12 {
		id := uniqueName("filler")
		reply := c.rawAdd(t, id, true)
		if reply.GetResult() != cnicodes.CNIReply_OK {
			g.Expect(reply.GetErrorCode()).To(Equal(cnicodes.CodePoolExhausted), "Add into a pool full of reservations: %s", reply.GetError())
			break
		}
		fillers = append(fillers, id)
	}
	g.Expect(fillers).To(HaveLen(12-5), "unconfirmed Adds next to lost, kept, legacy, again and the contiv-cni ADD")
	g.Expect(c.status(t).GetErrorCode()).To(Equal(cnicodes.CodeNotAvailable), "STATUS of a pool full of reservations")

	// The unconfirmed one goes at its deadline, not before, not much after.
	g.Eventually(func() []string { a, _ := held(t, n.agent, network, lost); return a }).
		WithTimeout(time.Until(replied.Add(reservationTimeout+reservationSlack))).WithPolling(20*time.Millisecond).
		Should(BeNil(), "the unconfirmed reservation of %s (deadline %s)", lost, deadline)
	gone := time.Since(replied)
	t.Logf("the unconfirmed reservation was released %v after the Add's reply (timeout %v)", gone.Round(time.Millisecond), reservationTimeout)
	g.Expect(gone).To(BeNumerically(">=", reservationTimeout-reservationSlack), "released too early")
	g.Expect(holders(t, n.agent, lostAddrs...)).To(BeEmpty(), "both addresses of %s are free", lost)
	g.Expect(mentions(t, n.agent, lost, "expired")).NotTo(BeEmpty(), "the agent logs the expiry of %s", lost)
	reply = c.confirm(t, lost, lostResv)
	g.Expect(reply.GetErrorCode()).To(Equal(cnicodes.CodeBadRequest), "Confirm after the expiry: %s", reply.GetError())
	g.Expect(reply.GetError()).To(ContainSubstring(lost))
	g.Eventually(func() []restAllocation { return restAllocations(t, n.agent) }).
		WithTimeout(reservationSlack).WithPolling(20*time.Millisecond).
		ShouldNot(ContainElement(HaveField("ContainerID", HavePrefix("filler-"))), "the unconfirmed fillers expire with lost")
	g.Expect(c.status(t).GetResult()).To(Equal(cnicodes.CNIReply_OK), "STATUS once the reservations expired")
	fresh := uniqueName("fresh")
	_, _ = c.add(t, fresh, false)
	c.remove(t, fresh)

	// The others are held until well after the timeout.
	g.Consistently(func(g Gomega) {
		for _, k := range []struct {
			id    string
			addrs []netip.Prefix
		}{{kept, keptAddrs}, {legacyKey, legacyAddrs}, {again, againAddrs}} {
			addrs, _ := held(t, n.agent, network, k.id)
			g.Expect(addrs).To(Equal(addrStrings(k.addrs)), "%s", k.id)
		}
		expectHeldConfirmed(t, g, n.agent, list.Name, att, cniV4, cniV6)
	}).WithTimeout(time.Until(replied.Add(2 * reservationTimeout))).WithPolling(200 * time.Millisecond).Should(Succeed())

	for _, id := range []string{kept, legacyKey, again} {
		c.remove(t, id)
	}
	g.Expect(rt.DelNetworkList(ctxT(t), list, att)).To(Succeed())
	g.Expect(restAllocations(t, n.agent)).To(BeEmpty())
}

// mentions are the agent's log lines that contain every word.
func mentions(t *testing.T, a *testenv.Agent, words ...string) []string {
	t.Helper()
	var out []string
	for _, line := range a.LogMentions(t, words[0]) {
		all := true
		for _, w := range words[1:] {
			all = all && strings.Contains(line, w)
		}
		if all {
			out = append(out, line)
		}
	}
	return out
}
