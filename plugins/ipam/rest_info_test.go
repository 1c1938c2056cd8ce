package ipam_test

import (
	"encoding/json"
	"net/http"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/ipam"
)

// srv6Defaults is the srv6 block of every config below (contivconf's
// defaults).
const srv6Defaults = `{
	"servicePolicyBSIDSubnetCIDR": "8fff::/16",
	"servicePodLocalSIDSubnetCIDR": "9300::/16",
	"serviceHostLocalSIDSubnetCIDR": "9300::/16",
	"serviceNodeLocalSIDSubnetCIDR": "9000::/16",
	"nodeToNodePodLocalSIDSubnetCIDR": "9501::/16",
	"nodeToNodeHostLocalSIDSubnetCIDR": "9500::/16",
	"nodeToNodePodPolicySIDSubnetCIDR": "8501::/16",
	"nodeToNodeHostPolicySIDSubnetCIDR": "8500::/16",
	"sfcPolicyBSIDSubnetCIDR": "8eee::/16",
	"sfcServiceFunctionSIDSubnetCIDR": "9600::/16",
	"sfcEndLocalSIDSubnetCIDR": "9310::/16",
	"sfcIDLengthUsedInSidForServiceFunction": 16
}`

// A single-stack node's reply is Contiv's, key for key: no dualStack.
func TestRESTInfoOfASingleStackNodeIsContivs(t *testing.T) {
	g := NewWithT(t)
	f := newRESTFixture(t, restOpts{nodeID: 2})
	status, body := f.srv.Get(ipam.IPAMPath)
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(body).To(MatchJSON(`{
		"nodeId": 2,
		"nodeName": "node",
		"nodeIP": "3.4.5.194",
		"podSubnetThisNode": "1.2.128.16/29",
		"vppHostNetwork": "2.3.192.8/30",
		"config": {
			"serviceCIDR": "10.96.0.0/12",
			"podSubnetCIDR": "1.2.128.0/17",
			"podSubnetOneNodePrefixLen": 29,
			"vppHostSubnetCIDR": "2.3.192.0/18",
			"vppHostSubnetOneNodePrefixLen": 30,
			"nodeInterconnectCIDR": "3.4.5.192/26",
			"vxlanCIDR": "4.5.6.192/26",
			"srv6": ` + srv6Defaults + `
		},
		"absentPodReleases": {"enabled": false, "blocked": "no contiv-ksr mirror marker (contiv/mirror/status) in etcd: contiv-ksr is not running or is older than this agent"}
	}`))
}

// A dual-stack node's reply adds dualStack, its second family's
// addresses of the same node ID, and the config's dualStack in use.
func TestRESTInfoOfADualStackNodeHasBothFamilies(t *testing.T) {
	g := NewWithT(t)
	f := newRESTFixture(t, restOpts{yaml: dualStackConfig, nodeID: 2})
	status, body := f.srv.Get(ipam.IPAMPath)
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(body).To(MatchJSON(`{
		"nodeId": 2,
		"nodeName": "node",
		"nodeIP": "3.4.5.194",
		"podSubnetThisNode": "1.2.128.32/28",
		"vppHostNetwork": "2.3.192.8/30",
		"dualStack": {
			"podSubnetThisNode": "fe10:f00d::10/125",
			"podGatewayIP": "fe10:f00d::11",
			"natLoopbackIP": "fe10:f00d::16",
			"vppHostNetwork": "fe30:f00d::8/126",
			"nodeIP": "fe40:f00d::2",
			"vxlanIP": "fe20:f00d::2"
		},
		"config": {
			"serviceCIDR": "10.96.0.0/12",
			"podSubnetCIDR": "1.2.128.0/17",
			"podSubnetOneNodePrefixLen": 28,
			"vppHostSubnetCIDR": "2.3.192.0/18",
			"vppHostSubnetOneNodePrefixLen": 30,
			"nodeInterconnectCIDR": "3.4.5.192/26",
			"vxlanCIDR": "4.5.6.192/26",
			"srv6": ` + srv6Defaults + `,
			"dualStack": {
				"serviceCIDR": "fd00:96::/110",
				"podSubnetCIDR": "fe10:f00d::/90",
				"podSubnetOneNodePrefixLen": 125,
				"vppHostSubnetCIDR": "fe30:f00d::/90",
				"vppHostSubnetOneNodePrefixLen": 126,
				"nodeInterconnectCIDR": "fe40:f00d::/90",
				"vxlanCIDR": "fe20:f00d::/120"
			}
		},
		"absentPodReleases": {"enabled": false, "blocked": "no contiv-ksr mirror marker (contiv/mirror/status) in etcd: contiv-ksr is not running or is older than this agent"}
	}`))
}

// With contivCIDR in dualStack, the config shows the subnets of the split
// in use (without them, only contivCIDR and serviceCIDR), and keeps
// contivCIDR.
func TestRESTInfoShowsTheSecondFamilysSplitOfContivCIDR(t *testing.T) {
	g := NewWithT(t)
	yaml := `
ipamConfig:
  nodeInterconnectCIDR: 192.168.16.0/24
  dualStack:
    contivCIDR: fe10::/64
    serviceCIDR: fd00::/108
`
	f := newRESTFixture(t, restOpts{yaml: yaml, nodeID: 5})
	status, body := f.srv.Get(ipam.IPAMPath)
	g.Expect(status).To(Equal(http.StatusOK))
	var info struct {
		NodeIP    string          `json:"nodeIP"`
		DualStack json.RawMessage `json:"dualStack"`
		Config    struct {
			DualStack json.RawMessage `json:"dualStack"`
		} `json:"config"`
	}
	g.Expect(json.Unmarshal([]byte(body), &info)).To(Succeed())
	g.Expect(info.NodeIP).To(Equal("192.168.16.5"))
	g.Expect(info.DualStack).To(MatchJSON(`{
		"podSubnetThisNode": "fe10::280/121",
		"podGatewayIP": "fe10::281",
		"natLoopbackIP": "fe10::2fe",
		"vppHostNetwork": "fe10::1:280/121",
		"nodeIP": "fe10::2:5",
		"vxlanIP": "fe10::2:205"
	}`))
	g.Expect(info.Config.DualStack).To(MatchJSON(`{
		"contivCIDR": "fe10::/64",
		"serviceCIDR": "fd00::/108",
		"podSubnetCIDR": "fe10::/112",
		"podSubnetOneNodePrefixLen": 121,
		"vppHostSubnetCIDR": "fe10::1:0/112",
		"vppHostSubnetOneNodePrefixLen": 121,
		"nodeInterconnectCIDR": "fe10::2:0/119",
		"vxlanCIDR": "fe10::2:200/119"
	}`))
}

// Without dualStack.nodeInterconnectCIDR the second family has no node IP
// (the primary's still answers).
func TestRESTInfoOmitsAnUndefinedSecondNodeIP(t *testing.T) {
	g := NewWithT(t)
	yaml := `
ipamConfig:
  nodeInterconnectCIDR: 192.168.16.0/24
  dualStack:
    podSubnetCIDR: fe10:f00d::/90
    podSubnetOneNodePrefixLen: 125
    vppHostSubnetCIDR: fe30:f00d::/90
    vppHostSubnetOneNodePrefixLen: 126
    vxlanCIDR: fe20:f00d::/120
    serviceCIDR: fd00:96::/110
`
	f := newRESTFixture(t, restOpts{yaml: yaml, nodeID: 3})
	status, body := f.srv.Get(ipam.IPAMPath)
	g.Expect(status).To(Equal(http.StatusOK))
	var info ipam.NodeIPAMInfo
	g.Expect(json.Unmarshal([]byte(body), &info)).To(Succeed())
	g.Expect(info.NodeIP).To(Equal("192.168.16.3"))
	g.Expect(info.DualStack).To(Equal(&ipam.FamilyInfo{
		PodSubnetThisNode: "fe10:f00d::18/125", PodGatewayIP: "fe10:f00d::19", NatLoopbackIP: "fe10:f00d::1e",
		VppHostNetwork: "fe30:f00d::c/126", VxlanIP: "fe20:f00d::3",
	}))
	g.Expect(body).NotTo(ContainSubstring(`"nodeIP": "fe`))
	g.Expect(info.Config.DualStack.NodeInterconnectCIDR).To(BeEmpty())
}
