package ipam_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ipam"
)

func TestRESTDumpIsNotReadyBeforeTheFirstResync(t *testing.T) {
	g := NewWithT(t)
	f := newRESTFixture(t, restOpts{noSync: true})
	status, body := f.srv.Get(ipam.DumpPath)
	g.Expect(status).To(Equal(http.StatusServiceUnavailable))
	g.Expect(body).To(MatchJSON(`{"error": "IPAM is not initialised yet: no resync processed"}`))

	g.Expect(f.ipam.Resync(&api.DBResync{}, api.KubeStateData{}, 1, nil)).To(Succeed())
	status, body = f.srv.Get(ipam.DumpPath)
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(body).To(MatchJSON(`{
		"ipv4": {},
		"ipv6": {},
		"status": "1.2.128.8/29: 0/4 allocated, 0 excluded, 0 cooling down; 0 reservations awaiting confirmation",
		"debugStatus": "1.2.128.8/29: 0/4 allocated, 0 excluded, 0 cooling down; 0 reservations awaiting confirmation\n"
	}`))
}

func TestRESTDumpShowsBothFamiliesAndTheirOwners(t *testing.T) {
	g := NewWithT(t)
	f := newRESTFixture(t, restOpts{yaml: dualStackConfig})
	_, err := addPod(f.ipam, pod1, att("c1", "eth0"))
	g.Expect(err).NotTo(HaveOccurred())
	_, _, err = f.ipam.AllocateNext("", "router")
	g.Expect(err).NotTo(HaveOccurred())
	_, _, err = f.ipam.AllocateNextWithExpiration("ipv4", "health", time.Minute)
	g.Expect(err).NotTo(HaveOccurred())

	status, body := f.srv.Get(ipam.DumpPath)
	g.Expect(status).To(Equal(http.StatusOK))
	const line = "1.2.128.16/28: 3/12 allocated, 0 excluded, 0 cooling down; fe10:f00d::8/125: 2/4 allocated, 0 excluded, 0 cooling down; 1 reservations awaiting confirmation"
	g.Expect(body).To(MatchJSON(`{
		"ipv4": {"1.2.128.18": "default/pod1 net/c1/eth0", "1.2.128.19": "router", "1.2.128.20": "health"},
		"ipv6": {"fe10:f00d::a": "default/pod1 net/c1/eth0", "fe10:f00d::b": "router"},
		"status": "` + line + `",
		"debugStatus": "` + line + `\n1.2.128.18\tdefault/pod1 net/c1/eth0\n1.2.128.19\trouter\n1.2.128.20\thealth\nfe10:f00d::a\tdefault/pod1 net/c1/eth0\nfe10:f00d::b\trouter\n"
	}`))
	var dump ipam.IPAMDump
	g.Expect(json.Unmarshal([]byte(body), &dump)).To(Succeed())
	g.Expect(dump.DebugStatus).To(Equal(f.ipam.DebugStatus()), "the reply's debug status is DebugStatus()")
}

func TestRESTDumpIsGetOnly(t *testing.T) {
	g := NewWithT(t)
	f := newRESTFixture(t, restOpts{})
	status, body := f.srv.Post(ipam.DumpPath, "")
	g.Expect(status).To(Equal(http.StatusMethodNotAllowed))
	g.Expect(body).To(ContainSubstring("allowed: GET"))
}
