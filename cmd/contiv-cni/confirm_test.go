package main

import (
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/podmanager/cni"
)

// reservedAdd is okAdd with a reservation to confirm.
func reservedAdd() *cni.CNIReply {
	r := okAdd()
	r.Reservation = "res-7"
	return r
}

// TestAddConfirmsTheReservation: an Add reply with a reservation is
// confirmed (the call's key, the reply's reservation) before the result
// is printed, in both modes and every version.
func TestAddConfirmsTheReservation(t *testing.T) {
	for _, ver := range allVersions {
		for mode, conf := range map[string]func(ver, sock, extra string) string{"plugin": pluginConf, "ipam": ipamConf} {
			t.Run(mode+"/"+ver, func(t *testing.T) {
				g := NewWithT(t)
				fa, sock := startAgent(t)
				fa.set("Add", reservedAdd())
				out := run{Command: "ADD", Conf: conf(ver, sock, "")}.mustSucceed(t)
				var res map[string]any
				g.Expect(json.Unmarshal([]byte(out), &res)).To(Succeed())
				g.Expect(res["cniVersion"]).To(Equal(ver))
				g.Expect(fa.Calls()).To(Equal([]string{"Add", "Confirm"}))
				confirms := fa.Confirms()
				g.Expect(confirms).To(HaveLen(1))
				c := confirms[0]
				g.Expect(c.GetReservation()).To(Equal("res-7"))
				g.Expect(c.GetContainerId()).To(Equal(testContainer))
				g.Expect(c.GetInterfaceName()).To(Equal("eth0"))
				g.Expect(c.GetNetworkName()).To(Equal(fa.Requests()[0].GetNetworkName()))
				g.Expect(c.GetVersion()).To(Equal(ver))
			})
		}
	}
}

// TestAddWithoutReservationDoesNotConfirm: an older agent's reply has no
// reservation: nothing is confirmed.
func TestAddWithoutReservationDoesNotConfirm(t *testing.T) {
	g := NewWithT(t)
	fa, sock := startAgent(t)
	run{Command: "ADD", Conf: pluginConf("1.1.0", sock, "")}.mustSucceed(t)
	g.Expect(fa.Calls()).To(Equal([]string{"Add"}))
	g.Expect(fa.Confirms()).To(BeEmpty())
}

// TestFailedConfirmRollsTheAddBack: when the confirmation fails, the ADD
// fails with the agent's code and message, nothing but the error is
// printed, and the ADD is rolled back as one whose reply cannot be
// printed (agent Delete, then the delegate's DEL).
func TestFailedConfirmRollsTheAddBack(t *testing.T) {
	cases := []struct {
		name    string
		confirm func(fa *fakeAgent)
		code    uint
		msg     string
	}{
		{"reservation expired", func(fa *fakeAgent) {
			fa.set("Confirm", errReply(cni.CodeBadRequest, `confirm: reservation "res-7" of contiv-net/c0ffee01/eth0: expired`))
		}, 102, `reservation "res-7" of contiv-net/c0ffee01/eth0: expired`},
		{"agent not ready", func(fa *fakeAgent) {
			fa.set("Confirm", errReply(cni.CodeTryAgainLater, "confirm: the agent is not ready, try again later"))
		}, 11, "not ready"},
		{"agent does not answer", func(fa *fakeAgent) { fa.hangOn("Confirm") }, 11, "Confirm, timeout 300ms"},
	}
	for _, tc := range cases {
		for _, mode := range []string{"plugin", "ipam", "delegate"} {
			t.Run(tc.name+"/"+mode, func(t *testing.T) {
				g := NewWithT(t)
				fa, sock := startAgent(t)
				fa.set("Add", reservedAdd())
				tc.confirm(fa)
				logPath, delegateCalls := delegateLog(t)
				extra := `,"grpcTimeout":"300ms"`
				var conf string
				switch mode {
				case "plugin":
					conf = pluginConf("1.0.0", sock, extra)
				case "ipam":
					conf = ipamConf("1.0.0", sock, extra)
				case "delegate":
					conf = pluginConf("1.0.0", sock, extra+`,"ipam":{"type":"fake-ipam"}`)
				}
				e := run{Command: "ADD", Conf: conf, Env: map[string]string{"FAKE_IPAM_LOG": logPath}}.mustFail(t)
				g.Expect(e.Code).To(Equal(tc.code), "msg %q", e.Msg)
				g.Expect(e.Msg).To(ContainSubstring(tc.msg))
				g.Expect(fa.Calls()).To(Equal([]string{"Add", "Confirm", "Delete"}))
				if mode == "delegate" {
					g.Expect(delegateCalls()).To(Equal([]string{"ADD", "DEL"}))
				} else {
					g.Expect(delegateCalls()).To(BeEmpty())
				}
			})
		}
	}
}

// TestUnusableReplyIsNotConfirmed: a reply contiv-cni cannot turn into a
// result is rolled back without confirming its reservation.
func TestUnusableReplyIsNotConfirmed(t *testing.T) {
	g := NewWithT(t)
	fa, sock := startAgent(t)
	fa.set("Add", &cni.CNIReply{Reservation: "res-7"})
	e := run{Command: "ADD", Conf: pluginConf("1.0.0", sock, "")}.mustFail(t)
	g.Expect(e.Code).To(BeEquivalentTo(100))
	g.Expect(fa.Calls()).To(Equal([]string{"Add", "Delete"}))
}
