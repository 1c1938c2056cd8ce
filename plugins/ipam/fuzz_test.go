package ipam_test

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contiv-ipam/agent/plugins/ipam"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// FuzzExternalIPAMData feeds arbitrary ipamData (the external IPAM result
// the CNI passes on) to AllocatePodIP: never a panic; an accepted address
// is returned again by GetPodIP and owned by the pod.
func FuzzExternalIPAMData(f *testing.F) {
	for _, seed := range []string{
		`{"version":"4","address":"1.2.200.7/24","gateway":"1.2.200.1"}`,
		`{"address":"fe10::7/64"}`, `{"address":"1.2.3.4"}`, ``, `null`, `{"address":7}`, `[]`,
		`[{"address":"1.2.200.7/24"}]`, `[{"address":"1.2.200.7/24"},{"address":"fe10::7/64"}]`,
		`[{"address":"1.2.200.7/24"},{"address":"1.2.200.8/24"}]`, `[null]`, ` [ ] `,
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

// FuzzStoredRecords stores an arbitrary value under an attachment key, an
// owner key and a pod key of a dual-stack node and restarts on it: never
// a panic, the resync succeeds, a value that does not parse is left in
// place, and whatever is restored lies in this node's pod subnets.
func FuzzStoredRecords(f *testing.F) {
	for _, seed := range []string{
		`{"ip":"1.2.128.18","ips":["1.2.128.18","fe10:f00d::a"],"pod":{"name":"p","namespace":"d"},"network":"net","containerId":"c1","ifName":"eth0"}`,
		`{"ip":"1.2.128.18","pod":{"name":"p","namespace":"d"},"network":"net","containerId":"c1","ifName":"eth0","reservation":{"id":"x","deadline":"2030-01-01T00:00:00Z"}}`,
		`{"owner":"router","seq":1,"ips":["1.2.128.19"]}`, `{"owner":"router","seq":1,"ips":["1.2.128.19","1.2.128.20"]}`,
		`1.2.128.20,fe10:f00d::c`, `1.2.128.20`, `fe10:f00d::c,1.2.128.20`, `,`, `{}`, `null`, ``,
		`{"ip":"1.2.128.18","ips":[],"reservation":{"id":"","deadline":"nope"}}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		db := openBolt(t, filepath.Join(t.TempDir(), "bolt.db"))
		defer db.Close()
		ctx := context.Background()
		keys := []string{ipam.AttachmentPrefix + "net/c1/eth0", ipam.OwnerPrefix + "router/1", ipam.AllocationPrefix + "d/p"}
		for _, k := range keys {
			if err := db.Put(ctx, k, []byte(value)); err != nil {
				t.Fatal(err)
			}
		}
		f := mustFixture(t, fixtureOpts{db: db, yaml: dualStackConfig}, nil)
		v4, v6, _ := f.ipam.Dump()
		for ip := range v4 {
			if !strings.HasPrefix(ip, "1.2.128.") {
				t.Fatalf("%q restored %s outside the IPv4 pod subnet", value, ip)
			}
		}
		for ip := range v6 {
			if !strings.HasPrefix(ip, "fe10:f00d::") {
				t.Fatalf("%q restored %s outside the IPv6 pod subnet", value, ip)
			}
		}
	})
}
