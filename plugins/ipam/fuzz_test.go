package ipam_test

import (
	"net"
	"testing"

	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// FuzzExternalIPAMData feeds arbitrary ipamData (the external IPAM result
// the CNI passes on) to AllocatePodIP: never a panic; an accepted address
// is returned again by GetPodIP and owned by the pod.
func FuzzExternalIPAMData(f *testing.F) {
	for _, seed := range []string{
		`{"version":"4","address":"1.2.200.7/24","gateway":"1.2.200.1"}`,
		`{"address":"fe10::7/64"}`, `{"address":"1.2.3.4"}`, ``, `null`, `{"address":7}`, `[]`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data string) {
		i := mustFixture(t, fixtureOpts{yaml: externalConfig}, nil).ipam
		id := podmodel.ID{Name: "p", Namespace: "ns"}
		ip, err := i.AllocatePodIP(id, "fuzz", data)
		if err != nil {
			if i.GetPodIP(id) != nil {
				t.Fatalf("refused %q but the pod has an address", data)
			}
			return
		}
		got := i.GetPodIP(id)
		if got == nil || !got.IP.Equal(ip) {
			t.Fatalf("accepted %q as %v, GetPodIP = %v", data, ip, got)
		}
		if owner, ok := i.GetPodFromIP(ip); !ok || owner != id {
			t.Fatalf("address %v of %q owned by %v %v", ip, data, owner, ok)
		}
		if ip.To16() == nil || len(ip) != net.IPv4len && len(ip) != net.IPv6len {
			t.Fatalf("bad IP %#v", ip)
		}
	})
}
