package ipam_test

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/infra/rest"
	"github.com/contiv-ipam/agent/infra/rest/resttest"
	"github.com/contiv-ipam/agent/plugins/ipam"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// operatorPaths are the four operator calls.
var operatorPaths = []string{ipam.OperatorAllocatePath, ipam.OperatorReservePath, ipam.OperatorConfirmPath, ipam.OperatorReleasePath,
	ipam.OperatorRestoreConflictPath, ipam.OperatorDiscardConflictPath}

// Without client authentication every operator call is refused with 403
// naming the keys that enable it; nothing is changed.
func TestOperatorCallsNeedClientAuthentication(t *testing.T) {
	f := newRESTFixture(t, restOpts{})
	bodies := map[string]string{
		ipam.OperatorAllocatePath: `{"ip": "1.2.128.10", "owner": "appliance"}`,
		ipam.OperatorReservePath:  `{"owner": "appliance", "timeout": "5m"}`,
		ipam.OperatorConfirmPath:  `{"ip": "1.2.128.10", "uuid": "0b0c2f4e-0000-4000-8000-000000000000"}`,
		ipam.OperatorReleasePath:  `{"owner": "appliance"}`,
	}
	for _, path := range operatorPaths {
		t.Run(path, func(t *testing.T) {
			g := NewWithT(t)
			status, body := f.post(path, bodies[path], admin())
			g.Expect(status).To(Equal(http.StatusForbidden))
			g.Expect(body).To(MatchJSON(`{"error": "the operator calls change IPAM state and need client authentication; ` +
				`set client-basic-auth, or client-cert-files with server-cert-file and server-key-file in http.conf", "reason": "forbidden"}`))
		})
	}
	g := NewWithT(t)
	v4, _, _ := f.ipam.Dump()
	g.Expect(v4).To(BeEmpty())
	refused := f.log.records("operator call refused: the REST server does not authenticate its clients")
	g.Expect(refused).To(HaveLen(len(operatorPaths)))
	g.Expect(refused[0]).To(HaveKeyWithValue("level", "WARN"))
	g.Expect(refused[0]).To(HaveKeyWithValue("user", ""), "the unchecked basic-auth header names nobody")
}

// The operator calls are POST only, and listed in the index.
func TestOperatorCallsArePostOnly(t *testing.T) {
	f := newRESTFixture(t, restOpts{rest: []rest.Option{basicAuthConf()}})
	for _, path := range operatorPaths {
		for _, method := range []string{http.MethodGet, http.MethodPut, http.MethodDelete} {
			status, body := f.srv.Do(method, path, "", admin())
			NewWithT(t).Expect(status).To(Equal(http.StatusMethodNotAllowed), "%s %s: %s", method, path, body)
		}
	}
	g := NewWithT(t)
	var listed []string
	for _, ep := range f.srv.Plugin.Endpoints() {
		if strings.HasPrefix(ep.Path, "/contiv/v1/ipam/operator/") {
			g.Expect(ep.Method).To(Equal(http.MethodPost))
			g.Expect(ep.Description).To(ContainSubstring("needs client authentication"))
			listed = append(listed, ep.Path)
		}
	}
	g.Expect(listed).To(ConsistOf(operatorPaths))
}

func TestOperatorWithWrongCredentialsIs401(t *testing.T) {
	g := NewWithT(t)
	f := newRESTFixture(t, restOpts{rest: []rest.Option{basicAuthConf()}})
	status, _ := f.post(ipam.OperatorAllocatePath, `{"ip": "1.2.128.10", "owner": "x"}`, resttest.BasicAuth("admin", "guess"))
	g.Expect(status).To(Equal(http.StatusUnauthorized))
	status, _ = f.post(ipam.OperatorAllocatePath, `{"ip": "1.2.128.10", "owner": "x"}`, nil)
	g.Expect(status).To(Equal(http.StatusUnauthorized))
	v4, _, _ := f.ipam.Dump()
	g.Expect(v4).To(BeEmpty())
}

func TestOperatorAllocateAndReleaseByAddress(t *testing.T) {
	g := NewWithT(t)
	f := newRESTFixture(t, restOpts{rest: []rest.Option{basicAuthConf()}})
	status, body := f.post(ipam.OperatorAllocatePath, `{"ip": "1.2.128.12", "owner": "appliance"}`, admin())
	g.Expect(status).To(Equal(http.StatusOK), body)
	g.Expect(body).To(MatchJSON(`{"owner": "appliance", "ip": "1.2.128.12", "cidrs": ["1.2.128.8/29"], "gatewayIP": "1.2.128.9"}`))
	v4, _, _ := f.ipam.Dump()
	g.Expect(v4).To(Equal(map[string]string{"1.2.128.12": "appliance"}))

	logged := f.log.records("operator call")
	g.Expect(logged).To(HaveLen(1))
	g.Expect(logged[0]).To(HaveKeyWithValue("level", "INFO"))
	g.Expect(logged[0]).To(HaveKeyWithValue("op", "allocate"))
	g.Expect(logged[0]).To(HaveKeyWithValue("ip", "1.2.128.12"))
	g.Expect(logged[0]).To(HaveKeyWithValue("owner", "appliance"))
	g.Expect(logged[0]).To(HaveKeyWithValue("status", 200.0))
	g.Expect(logged[0]).To(HaveKeyWithValue("user", "admin"))
	g.Expect(logged[0]).To(HaveKeyWithValue("remote", HavePrefix("127.0.0.1:")))
	g.Expect(logged[0]["result"]).To(MatchJSON(body))

	status, body = f.post(ipam.OperatorReleasePath, `{"ip": "1.2.128.12"}`, admin())
	g.Expect(status).To(Equal(http.StatusOK), body)
	g.Expect(body).To(MatchJSON(`{"ip": "1.2.128.12", "ips": ["1.2.128.12"], "released": true}`))
	v4, _, _ = f.ipam.Dump()
	g.Expect(v4).To(BeEmpty())
	g.Expect(f.log.records("operator call")).To(HaveLen(2))

	status, body = f.post(ipam.OperatorReleasePath, `{"ip": "1.2.128.12"}`, admin())
	g.Expect(status).To(Equal(http.StatusNotFound), body)
	g.Expect(body).To(MatchJSON(`{"error": "releasing 1.2.128.12: not allocated", "reason": "not-allocated"}`))
	failed := f.log.records("operator call failed")
	g.Expect(failed).To(HaveLen(1))
	g.Expect(failed[0]).To(HaveKeyWithValue("error", "releasing 1.2.128.12: not allocated"))
	g.Expect(failed[0]).To(HaveKeyWithValue("status", 404.0))
}

// A reservation of the next free addresses of a dual-stack node takes
// one of each family under one UUID; confirmed with either address, it
// never expires.
func TestOperatorReserveConfirm(t *testing.T) {
	g := NewWithT(t)
	clk := newFakeClock()
	f := newRESTFixture(t, restOpts{yaml: dualStackConfig, clock: clk, rest: []rest.Option{basicAuthConf()}})
	status, body := f.post(ipam.OperatorReservePath, `{"owner": "router", "timeout": "5m"}`, admin())
	g.Expect(status).To(Equal(http.StatusOK), body)
	var resv ipam.OperatorReservation
	g.Expect(json.Unmarshal([]byte(body), &resv)).To(Succeed())
	g.Expect(resv.ExpirationUUID).To(MatchRegexp(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`))
	g.Expect(body).To(MatchJSON(`{
		"owner": "router",
		"addresses": [
			{"ip": "1.2.128.18", "cidrs": ["1.2.128.16/28"], "gatewayIP": "1.2.128.17"},
			{"ip": "fe10:f00d::a", "cidrs": ["fe10:f00d::8/125"], "gatewayIP": "fe10:f00d::9"}
		],
		"expirationUUID": "` + resv.ExpirationUUID + `",
		"deadline": "` + clk.Now().Add(5*time.Minute).UTC().Format(time.RFC3339Nano) + `"
	}`))

	status, body = f.post(ipam.OperatorConfirmPath, `{"ip": "fe10:f00d::a", "uuid": "`+strings.ToUpper(resv.ExpirationUUID)+`"}`, admin())
	g.Expect(status).To(Equal(http.StatusOK), body)
	g.Expect(body).To(MatchJSON(`{"ip": "fe10:f00d::a", "expirationUUID": "` + resv.ExpirationUUID + `", "confirmed": true}`))
	_, _, st := f.ipam.Dump()
	g.Expect(st).To(HaveSuffix("0 reservations awaiting confirmation"))
	clk.Advance(time.Hour)
	g.Consistently(func() int { v4, _, _ := f.ipam.Dump(); return len(v4) }, "50ms").Should(Equal(1))

	status, body = f.post(ipam.OperatorConfirmPath, `{"ip": "1.2.128.18", "uuid": "`+resv.ExpirationUUID+`"}`, admin())
	g.Expect(status).To(Equal(http.StatusConflict), "confirmed already: %s", body)
	g.Expect(body).To(ContainSubstring(`"reason": "reservation-mismatch"`))

	status, body = f.post(ipam.OperatorReleasePath, `{"owner": "router"}`, admin())
	g.Expect(status).To(Equal(http.StatusOK), body)
	g.Expect(body).To(MatchJSON(`{"owner": "router", "released": true}`))
	v4, v6, _ := f.ipam.Dump()
	g.Expect(v4).To(BeEmpty())
	g.Expect(v6).To(BeEmpty())
}

// A reservation of a given address expires unconfirmed at its deadline.
func TestOperatorReservationExpires(t *testing.T) {
	g := NewWithT(t)
	clk := newFakeClock()
	f := newRESTFixture(t, restOpts{clock: clk, rest: []rest.Option{basicAuthConf()}})
	status, body := f.post(ipam.OperatorReservePath, `{"ip": "1.2.128.13", "owner": "health", "timeout": "90s"}`, admin())
	g.Expect(status).To(Equal(http.StatusOK), body)
	var resv ipam.OperatorReservation
	g.Expect(json.Unmarshal([]byte(body), &resv)).To(Succeed())
	g.Expect(resv.Addresses).To(Equal([]ipam.OperatorAddress{{IP: "1.2.128.13", CIDRs: []string{"1.2.128.8/29"}, GatewayIP: "1.2.128.9"}}))
	g.Expect(resv.Deadline).To(Equal(clk.Now().Add(90 * time.Second).UTC().Format(time.RFC3339Nano)))
	_, body = f.srv.Do(http.MethodGet, ipam.AllocationsPath, "", admin())
	g.Expect(body).To(ContainSubstring(`"reservationDeadline": "` + resv.Deadline + `"`))

	clk.Advance(90 * time.Second)
	g.Eventually(func() int { v4, _, _ := f.ipam.Dump(); return len(v4) }).Should(BeZero())
	status, body = f.post(ipam.OperatorConfirmPath, `{"ip": "1.2.128.13", "uuid": "`+resv.ExpirationUUID+`"}`, admin())
	g.Expect(status).To(Equal(http.StatusNotFound), "too late: %s", body)
}

// A reservation of one family's next free address.
func TestOperatorReserveOneFamily(t *testing.T) {
	g := NewWithT(t)
	f := newRESTFixture(t, restOpts{yaml: dualStackConfig, rest: []rest.Option{basicAuthConf()}})
	status, body := f.post(ipam.OperatorReservePath, `{"family": "ipv6", "owner": "router", "timeout": "1m"}`, admin())
	g.Expect(status).To(Equal(http.StatusOK), body)
	var resv ipam.OperatorReservation
	g.Expect(json.Unmarshal([]byte(body), &resv)).To(Succeed())
	g.Expect(resv.Addresses).To(Equal([]ipam.OperatorAddress{{IP: "fe10:f00d::a", CIDRs: []string{"fe10:f00d::8/125"}, GatewayIP: "fe10:f00d::9"}}))
	v4, v6, _ := f.ipam.Dump()
	g.Expect(v4).To(BeEmpty())
	g.Expect(v6).To(Equal(map[string]string{"fe10:f00d::a": "router"}))
}

// With mutual TLS the client certificate is the authentication, and its
// subject is logged as who asked.
func TestOperatorWithAClientCertificate(t *testing.T) {
	g := NewWithT(t)
	pki := resttest.NewPKI(t)
	f := newRESTFixture(t, restOpts{rest: []rest.Option{rest.UseConf(pki.MutualTLS(resttest.Config()))}})
	f.srv = f.srv.WithClient(pki.Client("netops"))
	status, body := f.post(ipam.OperatorAllocatePath, `{"ip": "1.2.128.11", "owner": "appliance"}`, nil)
	g.Expect(status).To(Equal(http.StatusOK), body)
	logged := f.log.records("operator call")
	g.Expect(logged).To(HaveLen(1))
	g.Expect(logged[0]).To(HaveKeyWithValue("cert-cn", "netops"))
	g.Expect(logged[0]).To(HaveKeyWithValue("user", ""))
	g.Expect(f.ipam.IPv4Allocator().Release(net.ParseIP("1.2.128.11"))).To(Succeed())
}

// A release by address with a pod releases the allocation only while
// that pod holds it: an address held by another pod or owner is 409
// moved, a free one 404 not-allocated, and neither releases anything.
// The pod does not stand in for force.
func TestOperatorReleaseOfAPodsAddress(t *testing.T) {
	g := NewWithT(t)
	f := newRESTFixture(t, restOpts{rest: []rest.Option{basicAuthConf()}})
	web, db := podmodel.ID{Name: "web", Namespace: "default"}, podmodel.ID{Name: "db", Namespace: "default"}
	webIP, dbIP := mustAdd(g, f.ipam, web, att("c1", "eth0")), mustAdd(g, f.ipam, db, att("c2", "eth0"))
	status, reply := f.post(ipam.OperatorAllocatePath, `{"ip": "1.2.128.12", "owner": "appliance"}`, admin())
	g.Expect(status).To(Equal(http.StatusOK), reply)
	held, _, _ := f.ipam.Dump()
	g.Expect(held).To(HaveLen(3))
	free := "1.2.128.13"
	g.Expect(held).NotTo(HaveKey(free))

	for _, tc := range []struct {
		name, query, body string
		status            int
		want              string
	}{
		{"held by another pod", "?force=true", `{"ip": "` + dbIP + `", "pod": "default/web"}`, http.StatusConflict,
			`{"error": "releasing ` + dbIP + ` of pod default/web: held by another pod or owner: attachment net/c2/eth0 of pod default/db holds it", "reason": "moved"}`},
		{"held by an owner", "?force=true", `{"ip": "1.2.128.12", "pod": "default/web"}`, http.StatusConflict,
			`{"error": "releasing 1.2.128.12 of pod default/web: held by another pod or owner: owner \"appliance\" allocation 1 holds it", "reason": "moved"}`},
		{"free", "?force=true", `{"ip": "` + free + `", "pod": "default/web"}`, http.StatusNotFound,
			`{"error": "releasing ` + free + ` of pod default/web: not allocated", "reason": "not-allocated"}`},
		{"the pod's, not forced", "", `{"ip": "` + webIP + `", "pod": "default/web"}`, http.StatusConflict,
			`{"error": "releasing ` + webIP + ` of pod default/web: held by a CNI attachment attachment net/c1/eth0: its runtime's CNI DEL or GC releases it; force releases it anyway", "reason": "live-attachment"}`},
	} {
		status, reply := f.post(ipam.OperatorReleasePath+tc.query, tc.body, admin())
		g.Expect(status).To(Equal(tc.status), tc.name+": "+reply)
		g.Expect(reply).To(MatchJSON(tc.want), tc.name)
		now, _, _ := f.ipam.Dump()
		g.Expect(now).To(Equal(held), tc.name+": nothing released")
	}

	status, reply = f.post(ipam.OperatorReleasePath+"?force=true", `{"ip": "`+webIP+`", "pod": "default/web"}`, admin())
	g.Expect(status).To(Equal(http.StatusOK), reply)
	g.Expect(reply).To(MatchJSON(`{"ip": "` + webIP + `", "pod": "default/web", "ips": ["` + webIP + `"], "released": true}`))
	g.Expect(f.ipam.GetPodIP(web)).To(BeNil())
	g.Expect(f.ipam.GetPodIP(db)).NotTo(BeNil(), "only the pod named")
	logged := f.log.records("operator call")
	g.Expect(logged).To(HaveLen(2), "the allocate and the release")
	g.Expect(logged[1]).To(HaveKeyWithValue("pod", "default/web"))

	status, reply = f.post(ipam.OperatorReleasePath+"?force=true", `{"ip": "`+webIP+`", "pod": "default/web"}`, admin())
	g.Expect(status).To(Equal(http.StatusNotFound), "released once: "+reply)
}

// On a dual-stack node a pod's allocation holds one address of each
// family: the release of either names both.
func TestOperatorReleaseOfAPodsAddressNamesEveryAddressReleased(t *testing.T) {
	g := NewWithT(t)
	f := newRESTFixture(t, restOpts{yaml: dualStackConfig, rest: []rest.Option{basicAuthConf()}})
	web := podmodel.ID{Name: "web", Namespace: "default"}
	_, err := addPod(f.ipam, web, att("c1", "eth0"))
	g.Expect(err).NotTo(HaveOccurred())
	v4, v6, _ := f.ipam.Dump()
	g.Expect(v4).To(HaveLen(1))
	g.Expect(v6).To(HaveLen(1))
	var ip4, ip6 string
	for a := range v4 {
		ip4 = a
	}
	for a := range v6 {
		ip6 = a
	}
	status, reply := f.post(ipam.OperatorReleasePath+"?force=true", `{"ip": "`+ip6+`", "pod": "default/web"}`, admin())
	g.Expect(status).To(Equal(http.StatusOK), reply)
	g.Expect(reply).To(MatchJSON(`{"ip": "` + ip6 + `", "pod": "default/web", "ips": ["` + ip4 + `", "` + ip6 + `"], "released": true}`))
	v4, v6, _ = f.ipam.Dump()
	g.Expect(v4).To(BeEmpty())
	g.Expect(v6).To(BeEmpty())
}

// A release by address answers once the release is durable: a delete the
// store refuses is 500 and the address stays held.
func TestOperatorReleaseThatTheStoreRefusesFails(t *testing.T) {
	g := NewWithT(t)
	fdb, _ := boltFaults(t)
	f := newRESTFixture(t, restOpts{db: fdb, rest: []rest.Option{basicAuthConf()}})
	web := podmodel.ID{Name: "web", Namespace: "default"}
	webIP := mustAdd(g, f.ipam, web, att("c1", "eth0"))

	fdb.setDecide(func([]kvdb.Op) fault { return failBefore })
	status, reply := f.post(ipam.OperatorReleasePath+"?force=true", `{"ip": "`+webIP+`", "pod": "default/web"}`, admin())
	g.Expect(status).To(Equal(http.StatusInternalServerError), reply)
	g.Expect(reply).To(ContainSubstring(`"reason": "internal"`))
	g.Expect(reply).To(ContainSubstring("releasing " + webIP + " of attachment net/c1/eth0: its record could not be deleted, it stays held"))
	g.Expect(f.ipam.GetPodIP(web)).NotTo(BeNil())

	fdb.setDecide(nil)
	status, reply = f.post(ipam.OperatorReleasePath+"?force=true", `{"ip": "`+webIP+`", "pod": "default/web"}`, admin())
	g.Expect(status).To(Equal(http.StatusOK), reply)
	g.Expect(f.ipam.GetPodIP(web)).To(BeNil())
}

// With the pod's UID too, a release by address goes only while that pod
// instance holds it: the address of a pod re-created under the name
// (another UID) is 409 moved, and a uid without a pod, or a bad one, is
// refused naming the field.
func TestOperatorReleaseOfAPodsAddressByUID(t *testing.T) {
	g := NewWithT(t)
	f := newRESTFixture(t, restOpts{rest: []rest.Option{basicAuthConf()}})
	web := podmodel.ID{Name: "web", Namespace: "default"}
	ip := addPodUID(g, f.ipam, web, uidNew, att("c2", "eth0"))
	ip = strings.Split(ip, "/")[0]
	for _, tc := range []struct {
		name, body, want string
		status           int
	}{
		{"another instance of the name", `{"ip": "` + ip + `", "pod": "default/web", "uid": "` + uidOld + `"}`, `"reason": "moved"`, http.StatusConflict},
		{"uid without pod", `{"ip": "` + ip + `", "uid": "` + uidNew + `"}`, `field \"uid\": given without \"pod\"`, http.StatusBadRequest},
		{"bad uid", `{"ip": "` + ip + `", "pod": "default/web", "uid": "a b"}`, `field \"uid\": \"a b\" is not a pod UID`, http.StatusBadRequest},
	} {
		status, reply := f.post(ipam.OperatorReleasePath+"?force=true", tc.body, admin())
		g.Expect(status).To(Equal(tc.status), tc.name+": "+reply)
		g.Expect(reply).To(ContainSubstring(tc.want), tc.name)
		g.Expect(attIP(g, f.ipam, att("c2", "eth0"))).NotTo(BeEmpty(), tc.name+": nothing released")
	}
	status, reply := f.post(ipam.OperatorReleasePath+"?force=true", `{"ip": "`+ip+`", "pod": "default/web", "uid": "`+uidNew+`"}`, admin())
	g.Expect(status).To(Equal(http.StatusOK), reply)
	g.Expect(attIP(g, f.ipam, att("c2", "eth0"))).To(BeEmpty())
}
