// Package ipam is the IPAM plugin: node-local IP address management in
// the style of Contiv-VPP.
//
// IPAMs on different nodes never talk to each other. Collisions are avoided
// by cutting the cluster-wide subnets of contiv.conf with the
// cluster-unique node ID that nodesync claims in etcd. From the ID and the
// config the plugin derives, for this node:
//
//   - the pod subnet (podSubnetCIDR cut to podSubnetOneNodePrefixLen, or
//     with useExternalIPAM the Kubernetes node's pod CIDR), its gateway
//     (host 1) and the NAT loopback (the address before the broadcast);
//     pods get the addresses between them: with the defaults and node ID 5,
//     subnet 10.1.5.0/24, gateway 10.1.5.1, pods 10.1.5.2-10.1.5.253, NAT
//     loopback 10.1.5.254;
//   - the VPP-to-host subnet (vppHostSubnetCIDR cut to
//     vppHostSubnetOneNodePrefixLen): VPP end host 1, Linux end host 2
//     (172.30.5.1 and 172.30.5.2 for ID 5);
//   - the node-interconnect address (host <ID> of nodeInterconnectCIDR,
//     192.168.16.5; the static default gateway is stepped over and never
//     handed out) and the VXLAN address (host <ID> of vxlanCIDR).
//
// The same arithmetic answers for other nodes (PodSubnetOtherNode,
// NodeIPAddress(id), ...) and maps a pod IP back to its node ID. A node ID
// that does not fit a subnet is an error, never an address outside it.
//
// Pod addresses are handed out next-fit (the first free address after the
// last one handed out, wrapping around) by an ipalloc pool, idempotently
// per pod, and stored in bolt under AllocationPrefix before AllocatePodIP
// returns. The plugin is a controller event handler: the first resync, a
// healing resync and a PodCIDRChange rebuild everything, with the
// allocations taken from the pods in the Kubernetes state and from bolt.
// With an external IPAM, a NodeUpdate that moves this node's Kubernetes
// pod CIDR makes the plugin push PodCIDRChange, an upstream resync of every
// handler. A pod deleted from Kubernetes gives its address back.
package ipam
