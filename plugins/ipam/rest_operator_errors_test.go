package ipam_test

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/rest"
	"github.com/contiv-ipam/agent/plugins/ipam"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// Every class of refusal of the operator calls, on a single-stack node
// (pods 1.2.128.10-13) where 1.2.128.10 is held by "held" and 1.2.128.11
// is excluded. No row changes anything.
func TestOperatorRefusals(t *testing.T) {
	f := newRESTFixture(t, restOpts{rest: []rest.Option{basicAuthConf()}})
	NewWithT(t).Expect(f.ipam.AllocateIPString("1.2.128.10", "held")).To(Succeed())
	f.ipam.BlacklistIP(net.ParseIP("1.2.128.11"), "appliance")
	const uuid = "0b0c2f4e-1111-4000-8000-000000000000"
	cases := []struct {
		name, path, body string
		contentType      string // "" = application/json
		status           int
		reason, error    string
	}{
		// The body.
		{"empty body", ipam.OperatorAllocatePath, ``, "", 400, "bad-request",
			`body: empty: want a JSON object with "ip", "owner"`},
		{"not an object", ipam.OperatorAllocatePath, `["1.2.128.12"]`, "", 400, "bad-request",
			`body: want a JSON object, got [`},
		{"invalid JSON", ipam.OperatorAllocatePath, `{"ip": "1.2.128.12",}`, "", 400, "bad-request",
			`body: invalid JSON: invalid character '}' looking for beginning of object key string`},
		{"unclosed object", ipam.OperatorAllocatePath, `{"ip": "1.2.128.12"`, "", 400, "bad-request",
			`body: the JSON object is not closed: the end of the body`},
		{"data after the object", ipam.OperatorAllocatePath, `{"ip": "1.2.128.12", "owner": "x"} {}`, "", 400, "bad-request",
			`body: data after the JSON object: {`},
		{"unknown field", ipam.OperatorAllocatePath, `{"ip": "1.2.128.12", "owner": "x", "force": "yes"}`, "", 400, "bad-request",
			`body: unknown field "force" (allocate takes "ip", "owner")`},
		{"field of another call", ipam.OperatorAllocatePath, `{"ip": "1.2.128.12", "owner": "x", "timeout": "5m"}`, "", 400, "bad-request",
			`body: unknown field "timeout" (allocate takes "ip", "owner")`},
		{"field in another case", ipam.OperatorAllocatePath, `{"IP": "1.2.128.12", "owner": "x"}`, "", 400, "bad-request",
			`body: unknown field "IP" (allocate takes "ip", "owner")`},
		{"field given twice", ipam.OperatorAllocatePath, `{"ip": "1.2.128.12", "ip": "1.2.128.13", "owner": "x"}`, "", 400, "bad-request",
			`field "ip": given twice`},
		{"not a string", ipam.OperatorAllocatePath, `{"ip": 16909322, "owner": "x"}`, "", 400, "bad-request",
			`field "ip": want a JSON string, got 16909322`},
		{"null", ipam.OperatorReservePath, `{"ip": null, "owner": "x", "timeout": "5m"}`, "", 400, "bad-request",
			`field "ip": want a JSON string, got null`},
		{"bad ip", ipam.OperatorAllocatePath, `{"ip": "1.2.128.x", "owner": "x"}`, "", 400, "bad-request",
			`field "ip": "1.2.128.x" is not an IP address`},
		{"ip with a zone", ipam.OperatorReleasePath, `{"ip": "fe80::1%eth0"}`, "", 400, "bad-request",
			`field "ip": "fe80::1%eth0" has a zone: want an address without one`},
		{"empty owner", ipam.OperatorAllocatePath, `{"ip": "1.2.128.12", "owner": ""}`, "", 400, "bad-request",
			`field "owner": "" is empty: want the owner's name`},
		{"owner that is an address", ipam.OperatorReleasePath, `{"owner": "1.2.128.10"}`, "", 400, "bad-request",
			`field "owner": "1.2.128.10" is an IP address: want a name (release by address with "ip")`},
		{"owner with a control character", ipam.OperatorAllocatePath, `{"ip": "1.2.128.12", "owner": "a\nb"}`, "", 400, "bad-request",
			`field "owner": "a\nb" has a character that is not printable`},
		{"owner too long", ipam.OperatorAllocatePath, `{"ip": "1.2.128.12", "owner": "` + strings.Repeat("o", 257) + `"}`, "", 400, "bad-request",
			`field "owner": "` + strings.Repeat("o", 80) + `"... is longer than 256 bytes`},
		{"bad timeout", ipam.OperatorReservePath, `{"owner": "x", "timeout": "5 minutes"}`, "", 400, "bad-request",
			`field "timeout": "5 minutes" is not a duration: want one such as "30s" or "5m"`},
		{"zero timeout", ipam.OperatorReservePath, `{"owner": "x", "timeout": "0s"}`, "", 400, "bad-request",
			`field "timeout": "0s" is not positive`},
		{"negative timeout", ipam.OperatorReservePath, `{"owner": "x", "timeout": "-1m"}`, "", 400, "bad-request",
			`field "timeout": "-1m" is not positive`},
		{"timeout missing", ipam.OperatorReservePath, `{"owner": "x"}`, "", 400, "bad-request",
			`field "timeout": missing`},
		{"owner missing", ipam.OperatorAllocatePath, `{"ip": "1.2.128.12"}`, "", 400, "bad-request",
			`field "owner": missing`},
		{"bad family", ipam.OperatorReservePath, `{"family": "inet", "owner": "x", "timeout": "5m"}`, "", 400, "bad-request",
			`field "family": "inet" is not a family: want "ipv4", "ipv6" or "" (every family of the node)`},
		{"family with ip", ipam.OperatorReservePath, `{"ip": "1.2.128.12", "family": "ipv4", "owner": "x", "timeout": "5m"}`, "", 400, "bad-request",
			`field "family": given with "ip": give the address, or the family of the next free one`},
		{"bad uuid", ipam.OperatorConfirmPath, `{"ip": "1.2.128.10", "uuid": "yes"}`, "", 400, "bad-request",
			`field "uuid": "yes" is not a UUID`},
		{"release of ip and owner", ipam.OperatorReleasePath, `{"ip": "1.2.128.10", "owner": "held"}`, "", 400, "bad-request",
			`body: want exactly one of "ip" (release the allocation holding it) and "owner" (release its allocations)`},
		{"release of nothing", ipam.OperatorReleasePath, `{}`, "", 400, "bad-request",
			`body: want exactly one of "ip" (release the allocation holding it) and "owner" (release its allocations)`},
		{"pod with owner", ipam.OperatorReleasePath, `{"owner": "held", "pod": "default/web"}`, "", 400, "bad-request",
			`field "pod": given with "owner": the pod is a condition of a release by "ip"`},
		{"pod without namespace", ipam.OperatorReleasePath, `{"ip": "1.2.128.10", "pod": "web"}`, "", 400, "bad-request",
			`field "pod": "web" is not a pod: want "namespace/name"`},
		{"pod of three parts", ipam.OperatorReleasePath, `{"ip": "1.2.128.10", "pod": "default/web/0"}`, "", 400, "bad-request",
			`field "pod": "default/web/0" is not a pod: want "namespace/name"`},
		{"pod with an empty name", ipam.OperatorReleasePath, `{"ip": "1.2.128.10", "pod": "default/"}`, "", 400, "bad-request",
			`field "pod": "default/" is not a pod: want "namespace/name"`},
		{"pod with a space", ipam.OperatorReleasePath, `{"ip": "1.2.128.10", "pod": "default/web 0"}`, "", 400, "bad-request",
			`field "pod": "default/web 0" has a space or a character that is not printable`},
		{"pod too long", ipam.OperatorReleasePath, `{"ip": "1.2.128.10", "pod": "default/` + strings.Repeat("w", 310) + `"}`, "", 400, "bad-request",
			`field "pod": "default/` + strings.Repeat("w", 72) + `"... is longer than 317 bytes`},
		{"pod not a string", ipam.OperatorReleasePath, `{"ip": "1.2.128.10", "pod": 7}`, "", 400, "bad-request",
			`field "pod": want a JSON string, got 7`},
		{"form post", ipam.OperatorReleasePath, `{"owner": "held"}`, "application/x-www-form-urlencoded", 415, "unsupported-media",
			`Content-Type "application/x-www-form-urlencoded": want Content-Type: application/json`},
		{"too large", ipam.OperatorReleasePath, `{"owner": "` + strings.Repeat("x", 64<<10) + `"}`, "", 413, "too-large",
			`body: longer than 65536 bytes`},
		// What IPAM refuses.
		{"address held", ipam.OperatorAllocatePath, `{"ip": "1.2.128.10", "owner": "x"}`, "", 409, "taken",
			`allocating for owner "x": address 1.2.128.10 is held by owner "held" allocation 1: address already allocated`},
		{"address excluded", ipam.OperatorReservePath, `{"ip": "1.2.128.11", "owner": "x", "timeout": "5m"}`, "", 409, "excluded",
			`allocating for owner "x": address 1.2.128.11 (excluded by "appliance"): the address is excluded from allocation`},
		{"reservation mismatch", ipam.OperatorConfirmPath, `{"ip": "1.2.128.10", "uuid": "` + uuid + `"}`, "", 409, "reservation-mismatch",
			`stopping timer ` + uuid + ` of owner "held" allocation 1 (it has ""): the reservation does not match the allocation's`},
		{"confirm of an address nobody holds", ipam.OperatorConfirmPath, `{"ip": "1.2.128.12", "uuid": "` + uuid + `"}`, "", 404, "not-allocated",
			`expiration timer of 1.2.128.12: not allocated`},
		{"release for a pod of an address another holds", ipam.OperatorReleasePath + "?force=true", `{"ip": "1.2.128.10", "pod": "default/web"}`, "", 409, "moved",
			`releasing 1.2.128.10 of pod default/web: held by another pod or owner: owner "held" allocation 1 holds it`},
		{"release for a pod of a free address", ipam.OperatorReleasePath, `{"ip": "1.2.128.12", "pod": "default/web"}`, "", 404, "not-allocated",
			`releasing 1.2.128.12 of pod default/web: not allocated`},
		{"release for a pod of an excluded address", ipam.OperatorReleasePath, `{"ip": "1.2.128.11", "pod": "default/web"}`, "", 404, "not-allocated",
			`releasing 1.2.128.11 of pod default/web: not allocated`},
		{"release of an owner that holds nothing", ipam.OperatorReleasePath, `{"owner": "nobody"}`, "", 404, "not-allocated",
			`releasing the addresses of owner "nobody": not allocated`},
		{"family the node lacks", ipam.OperatorReservePath, `{"family": "ipv6", "owner": "x", "timeout": "5m"}`, "", 422, "family-disabled",
			`IPv6 allocation disabled`},
		{"address of a family the node lacks", ipam.OperatorAllocatePath, `{"ip": "fe10:f00d::a", "owner": "x"}`, "", 422, "family-disabled",
			`allocating for owner "x": address fe10:f00d::a: IPv6 allocation disabled`},
		{"address outside the pod subnet", ipam.OperatorAllocatePath, `{"ip": "1.2.200.7", "owner": "x"}`, "", 422, "out-of-range",
			`allocating for owner "x": allocate 1.2.200.7: outside the pod subnets 1.2.128.8/29: address out of range`},
		{"the gateway", ipam.OperatorAllocatePath, `{"ip": "1.2.128.9", "owner": "x"}`, "", 422, "reserved",
			`allocating for owner "x": address 1.2.128.9 is the gateway of the pod subnet 1.2.128.8/29: address is reserved`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			h := admin()
			if tc.contentType != "" {
				h.Set("Content-Type", tc.contentType)
			}
			status, body := f.srv.Do(http.MethodPost, tc.path, tc.body, jsonHeaderUnlessSet(h))
			g.Expect(status).To(Equal(tc.status), body)
			var got ipam.OperatorError
			g.Expect(json.Unmarshal([]byte(body), &got)).To(Succeed(), body)
			g.Expect(got.Reason).To(Equal(tc.reason))
			if tc.error != "" {
				g.Expect(got.Error).To(Equal(tc.error))
			}
		})
	}
	g := NewWithT(t)
	v4, _, status := f.ipam.Dump()
	g.Expect(v4).To(Equal(map[string]string{"1.2.128.10": "held"}))
	g.Expect(status).To(Equal("1.2.128.8/29: 1/3 allocated, 1 excluded, 0 cooling down; 0 reservations awaiting confirmation"))
	g.Expect(f.log.records("operator call failed")).To(HaveLen(len(cases)), "every refusal is logged")
	g.Expect(f.log.records("operator call")).To(BeEmpty())
}

// jsonHeaderUnlessSet sets Content-Type: application/json unless h has
// one.
func jsonHeaderUnlessSet(h http.Header) http.Header {
	if h.Get("Content-Type") == "" {
		h.Set("Content-Type", "application/json")
	}
	return h
}

func TestOperatorReserveOfAFullFamilyIsAConflict(t *testing.T) {
	g := NewWithT(t)
	f := newRESTFixture(t, restOpts{rest: []rest.Option{basicAuthConf()}})
	for range 4 {
		status, body := f.post(ipam.OperatorReservePath, `{"family": "ipv4", "owner": "x", "timeout": "5m"}`, admin())
		g.Expect(status).To(Equal(http.StatusOK), body)
	}
	status, body := f.post(ipam.OperatorReservePath, `{"family": "ipv4", "owner": "x", "timeout": "5m"}`, admin())
	g.Expect(status).To(Equal(http.StatusConflict), body)
	g.Expect(body).To(ContainSubstring(`"reason": "exhausted"`))
	status, body = f.post(ipam.OperatorReleasePath, `{"owner": "x"}`, admin())
	g.Expect(status).To(Equal(http.StatusOK), body)
	v4, _, _ := f.ipam.Dump()
	g.Expect(v4).To(BeEmpty(), "a release by owner gives back all of its allocations")
}

func TestOperatorCallsAreNotReadyBeforeTheFirstResync(t *testing.T) {
	g := NewWithT(t)
	f := newRESTFixture(t, restOpts{noSync: true, rest: []rest.Option{basicAuthConf()}})
	status, body := f.post(ipam.OperatorAllocatePath, `{"ip": "1.2.128.10", "owner": "x"}`, admin())
	g.Expect(status).To(Equal(http.StatusServiceUnavailable), body)
	g.Expect(body).To(MatchJSON(`{"error": "IPAM is not initialised yet: no resync processed", "reason": "not-ready"}`))
	status, body = f.post(ipam.OperatorReleasePath, `{"owner": "x"}`, admin())
	g.Expect(status).To(Equal(http.StatusServiceUnavailable), body)
}

// A node that lost its node ID allocates nothing (its subnet may be
// another node's now); releases still work.
func TestOperatorAllocationsNeedTheNodeID(t *testing.T) {
	g := NewWithT(t)
	f := newRESTFixture(t, restOpts{rest: []rest.Option{basicAuthConf()}})
	g.Expect(f.ipam.AllocateIPString("1.2.128.10", "held")).To(Succeed())
	f.sync.id.Store(7)
	status, body := f.post(ipam.OperatorReservePath, `{"owner": "x", "timeout": "5m"}`, admin())
	g.Expect(status).To(Equal(http.StatusServiceUnavailable), body)
	g.Expect(body).To(ContainSubstring(`"reason": "node-id-lost"`))
	g.Expect(body).To(ContainSubstring("pod subnet 1.2.128.8/29 of node ID 1 (nodesync reports 7)"))
	status, body = f.post(ipam.OperatorReleasePath, `{"owner": "held"}`, admin())
	g.Expect(status).To(Equal(http.StatusOK), body)
}

func TestOperatorAllocationsWithAnExternalIPAMAreAConflict(t *testing.T) {
	g := NewWithT(t)
	yaml := defaultTestConfig + "  useExternalIPAM: true\n"
	f := newRESTFixture(t, restOpts{yaml: yaml, rest: []rest.Option{basicAuthConf()}, ks: nodeWithCIDR("1.2.128.8/29")})
	status, body := f.post(ipam.OperatorAllocatePath, `{"ip": "1.2.128.10", "owner": "x"}`, admin())
	g.Expect(status).To(Equal(http.StatusConflict), body)
	g.Expect(body).To(MatchJSON(`{"error": "pod addresses come from an external IPAM (ipamConfig.useExternalIPAM): nothing is allocated here", "reason": "external-ipam"}`))
}

// A release by owner name or by address never frees a CNI attachment's
// address unless forced: a name is no evidence that the pod is gone (its
// runtime's DEL or GC releases it). An owner's own allocations are
// released as before.
func TestOperatorReleaseRefusesCNIAttachmentsUnlessForced(t *testing.T) {
	g := NewWithT(t)
	f := newRESTFixture(t, restOpts{rest: []rest.Option{basicAuthConf()}})
	web := podmodel.ID{Name: "web", Namespace: "default"}
	ev, err := addPod(f.ipam, web, att("c1", "eth0"))
	g.Expect(err).NotTo(HaveOccurred())
	ip := addr(ev)

	for _, body := range []string{`{"owner": "default/web"}`, `{"ip": "` + ip + `"}`} {
		status, reply := f.post(ipam.OperatorReleasePath, body, admin())
		g.Expect(status).To(Equal(http.StatusConflict), reply)
		g.Expect(reply).To(ContainSubstring(`"reason": "live-attachment"`))
		g.Expect(reply).To(ContainSubstring("attachment net/c1/eth0"))
		g.Expect(f.ipam.GetPodIP(web)).NotTo(BeNil(), "nothing released by %s", body)
	}
	for _, q := range []string{"?force=maybe", "?force=true&force=true", "?forse=true"} {
		status, reply := f.post(ipam.OperatorReleasePath+q, `{"owner": "default/web"}`, admin())
		g.Expect(status).To(Equal(http.StatusBadRequest), q+": "+reply)
		g.Expect(f.ipam.GetPodIP(web)).NotTo(BeNil())
	}
	status, reply := f.post(ipam.OperatorReleasePath+"?force=false", `{"owner": "default/web"}`, admin())
	g.Expect(status).To(Equal(http.StatusConflict), reply)

	status, reply = f.post(ipam.OperatorAllocatePath, `{"ip": "1.2.128.12", "owner": "appliance"}`, admin())
	g.Expect(status).To(Equal(http.StatusOK), reply)
	status, reply = f.post(ipam.OperatorReleasePath, `{"owner": "appliance"}`, admin())
	g.Expect(status).To(Equal(http.StatusOK), "an owner's own allocation needs no force: "+reply)

	status, reply = f.post(ipam.OperatorReleasePath+"?force=true", `{"owner": "default/web"}`, admin())
	g.Expect(status).To(Equal(http.StatusOK), reply)
	g.Expect(f.ipam.GetPodIP(web)).To(BeNil(), "released when forced")
}
