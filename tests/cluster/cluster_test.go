package cluster_test

import (
	"errors"
	"syscall"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/ksr"
	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
	"github.com/contiv-ipam/agent/tests/cluster"
	"github.com/contiv-ipam/agent/tests/kubeenv"
	"github.com/contiv-ipam/agent/tests/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// gone tells whether no process has the ID pid any more.
func gone(pid int) bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }

// A clean Stop ends every process with exit status 0, and the agent's
// stop revokes its presence key (what lets contiv-ksr free its ID later).
func TestStopIsCleanAndLeavesNoProcess(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	kube := kubeenv.StartT(t)
	c := cluster.StartT(t, cluster.TestBins(t), kube.Kubeconfig)
	k := c.AddKSRT(t, ksr.Config{})
	a := c.AddAgentT(t, cluster.AgentOptions{Node: "stop-node"})
	cli := c.ClientT(t)

	st, err := k.Status(t.Context())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Synced).To(BeTrue())
	presence, err := cli.Get(t.Context(), vppnode.PresenceKey(a.Node))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(presence.Kvs).To(HaveLen(1), "the running agent's presence key")

	g.Expect(a.Stop(cluster.StopTimeout)).To(Succeed(), "the agent's exit status after SIGINT")
	presence, err = cli.Get(t.Context(), vppnode.PresenceKey(a.Node))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(presence.Kvs).To(BeEmpty(), "the presence key after a clean stop")

	g.Expect(c.Stop()).To(Succeed(), "every exit status after SIGINT")
	for _, p := range c.Procs() {
		g.Expect(gone(p.PID())).To(BeTrue(), "%s (pid %d) after Stop", p.Name, p.PID())
	}
}

// Kill ends every process, each in its own process group.
func TestKillEndsEveryProcess(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	c := cluster.StartT(t, cluster.TestBins(t), "")
	c.AddAgentT(t, cluster.AgentOptions{Node: "kill-node-1"})
	c.AddAgentT(t, cluster.AgentOptions{Node: "kill-node-2"})
	for _, p := range c.Procs() {
		pgid, err := syscall.Getpgid(p.PID())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pgid).To(Equal(p.PID()), "%s leads its own process group", p.Name)
	}
	g.Expect(c.Kill()).To(Succeed())
	for _, p := range c.Procs() {
		g.Expect(p.Running()).To(BeFalse(), p.Name)
		g.Expect(gone(p.PID())).To(BeTrue(), "%s (pid %d) after Kill", p.Name, p.PID())
	}
}
