package rest

import (
	"net/netip"
	"testing"

	. "github.com/onsi/gomega"
)

// advertiseURL: advertise-url wins; a listening address on one host is
// advertised as it is; an unspecified one is replaced by the node's IP
// (none known: ""); the scheme follows TLS.
func TestAdvertiseURLDerivation(t *testing.T) {
	node4 := netip.MustParseAddr("10.0.0.2")
	node6 := netip.MustParseAddr("fd00::2")
	cases := []struct {
		name, endpoint, advertise, addr string
		tls                             bool
		nodeIP                          netip.Addr
		want                            string
	}{
		{name: "loopback", endpoint: "127.0.0.1:0", addr: "127.0.0.1:41234", want: "http://127.0.0.1:41234"},
		{name: "https", endpoint: "127.0.0.1:9999", addr: "127.0.0.1:9999", tls: true, want: "https://127.0.0.1:9999"},
		{name: "one node address", endpoint: "10.0.0.7:9999", addr: "10.0.0.7:9999", nodeIP: node4, want: "http://10.0.0.7:9999"},
		{name: "IPv6 address", endpoint: "[fd00::7]:9999", addr: "[fd00::7]:9999", want: "http://[fd00::7]:9999"},
		{name: "all IPv4 interfaces", endpoint: "0.0.0.0:9999", addr: "0.0.0.0:9999", nodeIP: node4, want: "http://10.0.0.2:9999"},
		{name: "empty host", endpoint: ":9999", addr: "[::]:9999", nodeIP: node4, want: "http://10.0.0.2:9999"},
		{name: "all IPv6 interfaces", endpoint: "[::]:9999", addr: "[::]:9999", nodeIP: node6, tls: true, want: "https://[fd00::2]:9999"},
		{name: "mapped node IP", endpoint: "0.0.0.0:9999", addr: "0.0.0.0:9999",
			nodeIP: netip.MustParseAddr("::ffff:10.0.0.2"), want: "http://10.0.0.2:9999"},
		{name: "all interfaces, node IP unknown", endpoint: "0.0.0.0:9999", addr: "0.0.0.0:9999", want: ""},
		{name: "all interfaces, node IP unspecified", endpoint: "0.0.0.0:9999", addr: "0.0.0.0:9999",
			nodeIP: netip.IPv4Unspecified(), want: ""},
		{name: "not listening", endpoint: "127.0.0.1:9999", addr: "", want: ""},
		{name: "advertise-url wins", endpoint: "0.0.0.0:9999", addr: "0.0.0.0:9999", nodeIP: node4,
			advertise: "https://node1.example.com:8443/agent/", want: "https://node1.example.com:8443/agent"},
		{name: "advertise-url when not listening", endpoint: "127.0.0.1:9999", advertise: "http://h:1", want: "http://h:1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			c := DefaultConfig()
			c.Endpoint, c.AdvertiseURL = tc.endpoint, tc.advertise
			g.Expect(c.Validate()).To(Succeed())
			g.Expect(advertiseURL(&c, tc.addr, tc.tls, tc.nodeIP)).To(Equal(tc.want))
		})
	}
}
