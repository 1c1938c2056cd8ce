// Package contivconf reads contiv.conf, the agent's network configuration:
// it fills defaults, validates every key, derives the effective IPAM
// subnets (the contivCIDR split) and serves the result through API. It also
// follows this node's NodeConfig CRD when CRD node configuration is enabled.
//
// The file is found via the flag -contiv-config, else env CONTIV_CONFIG,
// else contiv.conf in -config-dir / CONFIG_DIR, else in the working
// directory (infra/config). It is YAML with the key names of the original Contiv-VPP
// contiv.conf, decoded strictly (an unknown key is an error naming the key
// and the file) and case-insensitively (STNVersion works for stnVersion).
// Keys that configure VPP, TAP, STN or SRv6 routing are accepted for
// compatibility and have no effect here. See contiv.conf beside this file
// for every key and its default.
//
// Validation reports every problem at once (errors.Join), each naming the
// key and the value and saying what would work: unparsable CIDRs and IPs;
// one-node prefix lengths that are not longer than their cluster prefix,
// exceed the address or leave too little room (a pod subnet needs 8
// addresses: network, gateway, NAT loopback, broadcast and at least one
// pod; a VPP-host subnet 4: network, VPP, Linux, broadcast); a
// node-interconnect subnet without room for node ID 1 past a gateway (4
// addresses) or a vxlan subnet without room for node ID 1 (2 addresses);
// a contivCIDR with fewer than 18 host bits; mixed address families or overlaps among the effective pod,
// vpp-host, node-interconnect, vxlan and service subnets; a defaultGateway
// or nodeConfig gateway (in the file or the NodeConfig CRD) that is not a
// unicast address of the subnets' family; empty or duplicate nodeConfig
// names; out-of-range compatibility keys. ipamConfig.dualStack (a second
// address family, absent = single-stack) is checked by the same per-family
// code, without defaults, and must be the other family;
// ipamConfig.excludeIPs entries must be addresses or CIDRs without host
// bits.
//
// The API hands out netip values (netip.Prefix, netip.Addr; the zero value
// means "none"), masked and validated, so its users convert and check
// nothing. IPAMConfig.Families lists the primary family, then the
// dual-stack one (IPAMConfig.Second) when configured; both are cut for the
// same node ID. The prefix arithmetic of the contivCIDR split is package
// engine/cidr.
//
// The caller's duties, in order:
//  1. NewPlugin(UseDeps(...)) with ServiceLabel (required: this node's name
//     is its agent label); UseConf replaces the file in tests.
//     NodeConfigChange is pushed as a follow-up through the transaction.
//     The agent registers -contiv-config before parsing flags.
//  2. LoadConfig (the agent calls it before any plugin's Init) loads and
//     validates; it fails with the joined errors, prefixed with the file
//     name. Init uses what LoadConfig loaded (it loads it itself when
//     LoadConfig was not called) and applies it to this node. Every config
//     that validates initialises IPAM (plugins/ipam/acceptedconfig_test.go).
//  3. Register the plugin as the first event handler of the controller:
//     every handler after it reads GetNodeConfig and GetStaticDefaultGW, which
//     its Resync updates from the NodeConfig CRD (kube-state key
//     k8s/nodeconfig/<node>). A change of that key makes Update push a
//     NodeConfigChange (UpstreamResync): every handler resyncs.
//  4. Read through API from any goroutine after Init; every getter returns
//     a copy.
//
// State: the loaded config (conf, parsed, source) is written by LoadConfig
// (or by Init when LoadConfig was not called) and this node's name and
// nodeConfig entry by Init, all on the agent's start goroutine before any
// reader; they are read-only afterwards. mu guards this node's NodeConfig
// CRD and the static default gateway derived from it: the controller's
// event loop writes them (Resync, Update), API getters read them from any
// goroutine.
//
// Without the plugin: DecodeConfig decodes a document over DefaultConfig,
// Parse (and Config.Validate) validates and derives the effective settings,
// FillDefaults merges a partly filled Config over the defaults the way the
// original's unit tests did; for tests, tools and fuzzing (FuzzParse).
package contivconf
