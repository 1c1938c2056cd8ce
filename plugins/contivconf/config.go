package contivconf

import (
	"encoding/json"
	"slices"

	"github.com/contiv-ipam/agent/infra/config"
)

// Config is contiv.conf. Every top-level key of the original Contiv-VPP
// contiv.conf is accepted so that real files load. Keys that configure VPP,
// TAP interfaces, STN or SRv6 routing are "accepted for compatibility, no
// effect (no VPP here)": they are validated where that is cheap and
// otherwise ignored. What matters to this agent is IPAMConfig, NodeConfig and
// CRDNodeConfigurationDisabled.
//
// Numeric keys are signed Go integers so that a value out of the original
// unsigned range is reported by Validate instead of silently wrapping.
type Config struct {
	// MTUSize is the MTU of VPP interfaces (0 = VPP default). No effect.
	MTUSize int64 `json:"mtuSize,omitempty"`
	// UseTAPInterfaces connects pods with TAPs rather than veths. No effect.
	UseTAPInterfaces bool `json:"useTAPInterfaces,omitempty"`
	// TAPInterfaceVersion is 1 or 2. No effect.
	TAPInterfaceVersion int `json:"tapInterfaceVersion,omitempty"`
	// TAPv2RxRingSize and the other ring sizes: 0 = VPP default. No effect.
	TAPv2RxRingSize   int `json:"tapv2RxRingSize,omitempty"`
	TAPv2TxRingSize   int `json:"tapv2TxRingSize,omitempty"`
	Vmxnet3RxRingSize int `json:"vmxnet3RxRingSize,omitempty"`
	Vmxnet3TxRingSize int `json:"vmxnet3TxRingSize,omitempty"`
	// InterfaceRxMode is "" (default), polling, interrupt or adaptive. No effect.
	InterfaceRxMode string `json:"interfaceRxMode,omitempty"`
	// TCPChecksumOffloadDisabled disables checksum offload on pod interfaces. No effect.
	TCPChecksumOffloadDisabled bool `json:"tcpChecksumOffloadDisabled,omitempty"`
	// EnableGSO enables generic segmentation offload. No effect.
	EnableGSO bool `json:"enableGSO,omitempty"`

	// MainVRFID and PodVRFID are VPP VRF tables. No effect.
	MainVRFID int64 `json:"mainVRFID,omitempty"`
	PodVRFID  int64 `json:"podVRFID,omitempty"`
	// NodeToNodeTransport is vxlan, srv6 or nooverlay. No effect.
	NodeToNodeTransport string `json:"nodeToNodeTransport,omitempty"`
	// UseSRv6ForServices routes services with SRv6. No effect.
	UseSRv6ForServices bool `json:"useSRv6ForServices,omitempty"`
	// UseSRv6ForServiceFunctionChaining chains service functions with SRv6. No effect.
	UseSRv6ForServiceFunctionChaining bool `json:"useSRv6ForServiceFunctionChaining,omitempty"`
	// UseDX6ForSrv6NodetoNodeTransport uses DX6 localsids for node-to-node SRv6. No effect.
	UseDX6ForSrv6NodetoNodeTransport bool `json:"useDX6ForSrv6NodetoNodeTransport,omitempty"`
	// RouteServiceCIDRToVPP routes the service CIDR from Linux to VPP. No effect.
	RouteServiceCIDRToVPP bool `json:"routeServiceCIDRToVPP,omitempty"`

	// ScanIPNeighbors periodically scans and probes IP neighbours. No effect.
	ScanIPNeighbors bool `json:"scanIPNeighbors,omitempty"`
	// IPNeighborScanInterval is in seconds (0-255). No effect.
	IPNeighborScanInterval int `json:"ipNeighborScanInterval,omitempty"`
	// IPNeighborStaleThreshold is in seconds (0-255). No effect.
	IPNeighborStaleThreshold int `json:"ipNeighborStaleThreshold,omitempty"`

	// StealFirstNIC, StealInterface, STNSocketFile and STNVersion configure
	// the steal-the-NIC mode. No effect.
	StealFirstNIC  bool   `json:"stealFirstNIC,omitempty"`
	StealInterface string `json:"stealInterface,omitempty"`
	STNSocketFile  string `json:"stnSocketFile,omitempty"`
	STNVersion     int    `json:"stnVersion,omitempty"`

	// NatExternalTraffic NATs traffic leaving the cluster. No effect.
	NatExternalTraffic bool `json:"natExternalTraffic,omitempty"`
	// EnablePacketTrace enables VPP packet tracing. No effect.
	EnablePacketTrace bool `json:"enablePacketTrace,omitempty"`
	// CRDNodeConfigurationDisabled ignores the NodeConfig CRD (etcd key
	// k8s/nodeconfig/<node>); when false, the CRD entry of this node takes
	// priority over its nodeConfig entry here.
	CRDNodeConfigurationDisabled bool `json:"crdNodeConfigurationDisabled,omitempty"`

	// IPAMConfig is the ipamConfig block.
	IPAMConfig IPAMConfigJSON `json:"ipamConfig"`
	// NodeConfig holds per-node settings, one entry per node name.
	NodeConfig []NodeConfig `json:"nodeConfig,omitempty"`
}

// IPAMConfigJSON is the ipamConfig block as written in contiv.conf (and as
// served by REST). CIDRs and IPs are strings here; Parse turns them into an
// IPAMConfig.
type IPAMConfigJSON struct {
	// UseExternalIPAM: pod IPs come from an external IPAM and this node's
	// pod subnet is the Kubernetes node's pod CIDR.
	UseExternalIPAM bool `json:"useExternalIPAM,omitempty"`
	// ContivCIDR, when set, replaces the pod, vpp-host, vxlan and (unless
	// given) node-interconnect subnets by a split of this one (spec §2.12).
	ContivCIDR string `json:"contivCIDR,omitempty"`
	// ServiceCIDR is the Kubernetes service network.
	ServiceCIDR string `json:"serviceCIDR,omitempty"`
	// NodeInterconnectDHCP: node interconnect addresses come from DHCP.
	NodeInterconnectDHCP bool `json:"nodeInterconnectDHCP,omitempty"`
	// PodSubnetCIDR is the cluster-wide pod subnet.
	PodSubnetCIDR string `json:"podSubnetCIDR,omitempty"`
	// PodSubnetOneNodePrefixLen is the prefix length of one node's pod subnet.
	PodSubnetOneNodePrefixLen int `json:"podSubnetOneNodePrefixLen,omitempty"`
	// VPPHostSubnetCIDR is the cluster-wide VPP-to-host interconnect subnet.
	VPPHostSubnetCIDR string `json:"vppHostSubnetCIDR,omitempty"`
	// VPPHostSubnetOneNodePrefixLen is the prefix length of one node's part.
	VPPHostSubnetOneNodePrefixLen int `json:"vppHostSubnetOneNodePrefixLen,omitempty"`
	// NodeInterconnectCIDR is the subnet of the nodes' main interfaces
	// ("" = none).
	NodeInterconnectCIDR string `json:"nodeInterconnectCIDR,omitempty"`
	// VxlanCIDR is the subnet of the VXLAN tunnel endpoints.
	VxlanCIDR string `json:"vxlanCIDR,omitempty"`
	// DefaultGateway is the default gateway of the nodes ("" = none).
	DefaultGateway string `json:"defaultGateway,omitempty"`
	// SRv6 are the SID prefixes of the SRv6 features.
	SRv6 SRv6ConfigJSON `json:"srv6"`
	// DualStack holds the subnets of a second address family (the other
	// one than the keys above); nil = single-stack. Nothing in it has a
	// default.
	DualStack *FamilyJSON `json:"dualStack,omitempty"`
	// ExcludeIPs are addresses and CIDRs never handed out to pods.
	ExcludeIPs []ExclusionJSON `json:"excludeIPs,omitempty"`
	// ReserveLocalRoutes: pod addresses that collide with the host's routes
	// are excluded too.
	ReserveLocalRoutes bool `json:"reserveLocalRoutes,omitempty"`
}

// FamilyJSON is ipamConfig.dualStack: the subnets of the second address
// family, with the meaning of the ipamConfig keys of the same names. No key
// has a default: serviceCIDR is required, and so are podSubnetCIDR,
// podSubnetOneNodePrefixLen, vppHostSubnetCIDR, vppHostSubnetOneNodePrefixLen
// and vxlanCIDR unless contivCIDR gives them; nodeInterconnectCIDR is
// optional. nodeInterconnectDHCP and defaultGateway apply to the primary
// family only.
type FamilyJSON struct {
	ContivCIDR                    string `json:"contivCIDR,omitempty"`
	ServiceCIDR                   string `json:"serviceCIDR,omitempty"`
	PodSubnetCIDR                 string `json:"podSubnetCIDR,omitempty"`
	PodSubnetOneNodePrefixLen     int    `json:"podSubnetOneNodePrefixLen,omitempty"`
	VPPHostSubnetCIDR             string `json:"vppHostSubnetCIDR,omitempty"`
	VPPHostSubnetOneNodePrefixLen int    `json:"vppHostSubnetOneNodePrefixLen,omitempty"`
	NodeInterconnectCIDR          string `json:"nodeInterconnectCIDR,omitempty"`
	VxlanCIDR                     string `json:"vxlanCIDR,omitempty"`
}

// ExclusionJSON is one entry of ipamConfig.excludeIPs.
type ExclusionJSON struct {
	// CIDR is an address (a /32 or /128) or a CIDR without host bits.
	CIDR string `json:"cidr"`
	// Owner names who uses the addresses, for the log ("" = "contiv.conf").
	Owner string `json:"owner,omitempty"`
}

// primaryFamily is the primary family's keys of ic in the form of a
// dualStack block, so that both families are checked by the same code.
func (ic *IPAMConfigJSON) primaryFamily() FamilyJSON {
	return FamilyJSON{
		ContivCIDR:                    ic.ContivCIDR,
		ServiceCIDR:                   ic.ServiceCIDR,
		PodSubnetCIDR:                 ic.PodSubnetCIDR,
		PodSubnetOneNodePrefixLen:     ic.PodSubnetOneNodePrefixLen,
		VPPHostSubnetCIDR:             ic.VPPHostSubnetCIDR,
		VPPHostSubnetOneNodePrefixLen: ic.VPPHostSubnetOneNodePrefixLen,
		NodeInterconnectCIDR:          ic.NodeInterconnectCIDR,
		VxlanCIDR:                     ic.VxlanCIDR,
	}
}

// clone deep-copies ic (DualStack and ExcludeIPs included).
func (ic *IPAMConfigJSON) clone() IPAMConfigJSON {
	out := *ic
	if ic.DualStack != nil {
		d := *ic.DualStack
		out.DualStack = &d
	}
	out.ExcludeIPs = slices.Clone(ic.ExcludeIPs)
	return out
}

// SRv6ConfigJSON is ipamConfig.srv6: IPv6 prefixes of the SRv6 SIDs. Parsed
// and validated; accepted for compatibility, no effect (no VPP here).
type SRv6ConfigJSON struct {
	ServicePolicyBSIDSubnetCIDR       string `json:"servicePolicyBSIDSubnetCIDR,omitempty"`
	ServicePodLocalSIDSubnetCIDR      string `json:"servicePodLocalSIDSubnetCIDR,omitempty"`
	ServiceHostLocalSIDSubnetCIDR     string `json:"serviceHostLocalSIDSubnetCIDR,omitempty"`
	ServiceNodeLocalSIDSubnetCIDR     string `json:"serviceNodeLocalSIDSubnetCIDR,omitempty"`
	NodeToNodePodLocalSIDSubnetCIDR   string `json:"nodeToNodePodLocalSIDSubnetCIDR,omitempty"`
	NodeToNodeHostLocalSIDSubnetCIDR  string `json:"nodeToNodeHostLocalSIDSubnetCIDR,omitempty"`
	NodeToNodePodPolicySIDSubnetCIDR  string `json:"nodeToNodePodPolicySIDSubnetCIDR,omitempty"`
	NodeToNodeHostPolicySIDSubnetCIDR string `json:"nodeToNodeHostPolicySIDSubnetCIDR,omitempty"`
	SFCPolicyBSIDSubnetCIDR           string `json:"sfcPolicyBSIDSubnetCIDR,omitempty"`
	SFCServiceFunctionSIDSubnetCIDR   string `json:"sfcServiceFunctionSIDSubnetCIDR,omitempty"`
	SFCEndLocalSIDSubnetCIDR          string `json:"sfcEndLocalSIDSubnetCIDR,omitempty"`
	// SFCIDLengthUsedInSidForServiceFunction is how many bits of the SFC ID
	// follow the sfcServiceFunctionSIDSubnetCIDR prefix in a SID.
	SFCIDLengthUsedInSidForServiceFunction int `json:"sfcIDLengthUsedInSidForServiceFunction,omitempty"`
}

// NodeConfig is one nodeConfig entry: settings of the node called NodeName.
// The same fields (without nodeName) form the spec of the NodeConfig CRD.
type NodeConfig struct {
	// NodeName is the node (agent label) the entry applies to.
	NodeName string `json:"nodeName"`
	// MainVPPInterface is the interface used for node-to-node traffic.
	MainVPPInterface InterfaceConfig `json:"mainVPPInterface,omitempty"`
	// OtherVPPInterfaces are further interfaces. No effect.
	OtherVPPInterfaces []InterfaceConfig `json:"otherVPPInterfaces,omitempty"`
	// StealInterface is a host interface to give to VPP. No effect.
	StealInterface string `json:"stealInterface,omitempty"`
	// Gateway is this node's default gateway (an IP, "" = none).
	Gateway string `json:"gateway,omitempty"`
	// NatExternalTraffic NATs traffic leaving the cluster. No effect.
	NatExternalTraffic bool `json:"natExternalTraffic,omitempty"`
}

// InterfaceConfig is one interface of a NodeConfig.
type InterfaceConfig struct {
	InterfaceName string `json:"interfaceName"`
	// IP is the interface address with its prefix length ("" = none).
	IP string `json:"ip,omitempty"`
	// UseDHCP takes the address from DHCP (unless IP is set).
	UseDHCP bool `json:"useDHCP,omitempty"`
}

// Default values of contiv.conf (spec §3.2).
const (
	DefaultServiceCIDR       = "10.96.0.0/12"
	DefaultPodSubnetCIDR     = "10.1.0.0/16"
	DefaultPodOneNodeLen     = 24
	DefaultVPPHostSubnetCIDR = "172.30.0.0/16"
	DefaultVPPHostOneNodeLen = 24
	DefaultVxlanCIDR         = "192.168.30.0/24"
	DefaultSTNSocketFile     = "/var/run/contiv/stn.sock"
	DefaultTransport         = "vxlan"
)

// DefaultConfig returns the defaults of the original code: every key a
// contiv.conf leaves out keeps its value from here.
func DefaultConfig() Config {
	return Config{
		UseTAPInterfaces:             true,
		TAPInterfaceVersion:          2,
		TCPChecksumOffloadDisabled:   true,
		MainVRFID:                    0,
		PodVRFID:                     1,
		NodeToNodeTransport:          DefaultTransport,
		ScanIPNeighbors:              true,
		IPNeighborScanInterval:       1,
		IPNeighborStaleThreshold:     4,
		STNSocketFile:                DefaultSTNSocketFile,
		NatExternalTraffic:           true,
		CRDNodeConfigurationDisabled: true,
		IPAMConfig: IPAMConfigJSON{
			ServiceCIDR:                   DefaultServiceCIDR,
			PodSubnetCIDR:                 DefaultPodSubnetCIDR,
			PodSubnetOneNodePrefixLen:     DefaultPodOneNodeLen,
			VPPHostSubnetCIDR:             DefaultVPPHostSubnetCIDR,
			VPPHostSubnetOneNodePrefixLen: DefaultVPPHostOneNodeLen,
			VxlanCIDR:                     DefaultVxlanCIDR,
			SRv6: SRv6ConfigJSON{
				ServicePolicyBSIDSubnetCIDR:            "8fff::/16",
				ServicePodLocalSIDSubnetCIDR:           "9300::/16",
				ServiceHostLocalSIDSubnetCIDR:          "9300::/16",
				ServiceNodeLocalSIDSubnetCIDR:          "9000::/16",
				NodeToNodePodLocalSIDSubnetCIDR:        "9501::/16",
				NodeToNodeHostLocalSIDSubnetCIDR:       "9500::/16",
				NodeToNodePodPolicySIDSubnetCIDR:       "8501::/16",
				NodeToNodeHostPolicySIDSubnetCIDR:      "8500::/16",
				SFCPolicyBSIDSubnetCIDR:                "8eee::/16",
				SFCServiceFunctionSIDSubnetCIDR:        "9600::/16",
				SFCEndLocalSIDSubnetCIDR:               "9310::/16",
				SFCIDLengthUsedInSidForServiceFunction: 16,
			},
		},
	}
}

// DecodeConfig decodes a contiv.conf document strictly over DefaultConfig,
// as Init does with the file. source names the data in errors (a path).
// It does not validate: call Validate or Parse on the result.
func DecodeConfig(data []byte, source string) (Config, error) {
	c := DefaultConfig()
	if err := config.Decode(data, &c, source); err != nil {
		return Config{}, err
	}
	return c, nil
}

// FillDefaults returns c with every zero-valued key replaced by its
// default: c is marshalled (zero values are omitted) and decoded over
// DefaultConfig, which is how the original merged UnitTestDeps.Config. A key
// whose default is non-zero cannot be set to zero or false this way; start
// from DefaultConfig() for that.
func FillDefaults(c Config) (Config, error) {
	data, err := json.Marshal(c)
	if err != nil {
		return Config{}, err
	}
	return DecodeConfig(data, "FillDefaults")
}

// Validate checks every key and returns every problem found, joined; each
// message names the key and its value. It is Parse without the result.
func (c *Config) Validate() error {
	_, err := Parse(c)
	return err
}
