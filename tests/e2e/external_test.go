package e2e

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/ksr"
	"github.com/contiv-ipam/agent/tests/cluster"
	"github.com/contiv-ipam/agent/tests/kubeenv"
)

// externalConf is conf/contiv.conf's addressing with useExternalIPAM.
const externalConf = `ipamConfig:
  useExternalIPAM: true
  podSubnetCIDR: 10.1.0.0/16
  podSubnetOneNodePrefixLen: 24
  vppHostSubnetCIDR: 172.30.0.0/16
  vppHostSubnetOneNodePrefixLen: 24
  nodeInterconnectCIDR: 192.168.16.0/24
  vxlanCIDR: 192.168.30.0/24
  serviceCIDR: 10.96.0.0/12
`

// With useExternalIPAM the agent's pod subnet follows its Node's
// spec.podCIDR. While the Node has no pod CIDR the agent waits, unready
// and naming the node, rather than take its node ID's slice of
// podSubnetCIDR (another node's pod CIDR, perhaps). The API server lets
// spec.podCIDR go from "" to a value only, so the second move deletes the
// Node (the agent keeps the pod CIDR in use meanwhile) and creates it
// again with another CIDR.
func TestExternalIPAMFollowsTheNodesPodCIDR(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	kube := kubeenv.StartT(t)
	c := cluster.StartT(t, cluster.TestBins(t), kube.Kubeconfig)
	c.AddKSRT(t, ksr.Config{})
	createNode(t, kube, "ext-node", "")
	a := c.AddAgentT(t, cluster.AgentOptions{Node: "ext-node", Conf: map[string]string{"contiv.conf": externalConf},
		Unready: true})
	g.Eventually(func() error {
		var status map[string]any
		return cluster.GetJSON(t.Context(), a.REST+"/readiness", &status)
	}).WithTimeout(15*time.Second).Should(MatchError(And(ContainSubstring("503"), ContainSubstring(`\"ext-node\" has no pod_CIDR`))),
		"without a pod CIDR the agent waits, unready, naming the node")
	_, err := a.IPAM(t.Context())
	g.Expect(err).To(MatchError(ContainSubstring("503")), "no subnet derived from the node ID")

	g.Expect(setPodCIDR(t.Context(), kube, "ext-node", "10.1.200.0/24")).To(Succeed())
	g.Eventually(podSubnet(t.Context(), a)).WithTimeout(15*time.Second).Should(Equal("10.1.200.0/24"),
		"the pod subnet after spec.podCIDR was set")

	g.Expect(setPodCIDR(t.Context(), kube, "ext-node", "10.1.201.0/24")).NotTo(Succeed(),
		"the API server refuses to change a pod CIDR that is set")
	deleteNode(t, kube, "ext-node")
	createNode(t, kube, "ext-node", "10.1.201.0/24")
	g.Eventually(podSubnet(t.Context(), a)).WithTimeout(15*time.Second).Should(Equal("10.1.201.0/24"),
		"the pod subnet after the Node came back with another pod CIDR")
}
