package ipam_test

import (
	"net"
	"net/http"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ipam"
)

func TestRESTPoolsCountsEveryStatePerPoolAndNode(t *testing.T) {
	g := NewWithT(t)
	f := newRESTFixture(t, restOpts{yaml: dualStackConfig + "  excludeIPs:\n    - cidr: 1.2.128.29\n", noSync: true})
	status, _ := f.srv.Get(ipam.PoolsPath)
	g.Expect(status).To(Equal(http.StatusServiceUnavailable))
	g.Expect(f.ipam.Resync(&api.DBResync{}, api.KubeStateData{}, 1, nil)).To(Succeed())

	_, err := addPod(f.ipam, pod1, att("c1", "eth0"))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = addPod(f.ipam, pod2, att("c2", "eth0"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.ipam.ReleaseIP(net.ParseIP("1.2.128.19"))).To(Succeed()) // pod2's, both families cool down

	status, body := f.srv.Get(ipam.PoolsPath)
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(body).To(MatchJSON(`{
		"pools": [
			{"cidr": "1.2.128.16/28", "family": "ipv4", "total": 12, "assigned": 1, "cooldown": 1, "excluded": 1, "free": 9},
			{"cidr": "fe10:f00d::8/125", "family": "ipv6", "total": 4, "assigned": 1, "cooldown": 1, "excluded": 0, "free": 2}
		],
		"total": 16, "assigned": 2, "cooldown": 2, "excluded": 1, "free": 11,
		"reservations": 0, "cooldownReused": 0
	}`))
}
