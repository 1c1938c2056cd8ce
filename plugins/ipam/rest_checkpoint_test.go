package ipam_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/rest"
	"github.com/contiv-ipam/agent/infra/rest/resttest"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ipam"
	"github.com/contiv-ipam/agent/plugins/ipam/checkpoint"
)

// authOpts is a REST fixture that authenticates its clients
// (basicAuthConf), on yaml with the clock clk (nil: the real one).
func authOpts(yaml string, clk *fakeClock) restOpts {
	return restOpts{yaml: yaml, clock: clk, rest: []rest.Option{basicAuthConf()}}
}

// newStoredFixture is newRESTFixture with a bolt file as IPAM's LocalDB:
// an import stores records and resyncs from the store, which a node
// without one (memory only) does not have.
func newStoredFixture(t *testing.T, o restOpts) *restFixture {
	t.Helper()
	if o.yaml == "" {
		o.yaml = defaultTestConfig
	}
	srv := resttest.New(t, o.rest...)
	conf, err := newContivConf(t, o.yaml)
	if err != nil {
		t.Fatal(err)
	}
	ns := &fakeNodeSync{}
	ns.id.Store(1)
	db := openBolt(t, filepath.Join(t.TempDir(), "bolt.db"))
	f := &restFixture{t: t, srv: srv, sync: ns, log: &logBuffer{}}
	log := slog.New(slog.NewJSONHandler(f.log, &slog.HandlerOptions{Level: slog.LevelInfo}))
	opts := []ipam.Option{ipam.UseDeps(func(d *ipam.Deps) {
		d.Log, d.ContivConf, d.NodeSync, d.ServiceLabel, d.HTTP, d.LocalDB = log, conf, ns, fakeLabel{thisNode}, srv.Plugin, db
	})}
	if o.clock != nil {
		opts = append(opts, ipam.UseClock(o.clock))
	}
	f.ipam = ipam.NewPlugin(opts...)
	if err := f.ipam.Init(); err != nil {
		t.Fatal(err)
	}
	if err := f.ipam.AfterInit(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.ipam.Close(); _ = db.Close() })
	if !o.noSync {
		if err := f.ipam.Resync(&api.DBResync{}, api.KubeStateData{}, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// export sends GET /contiv/v1/ipam/checkpoint as admin and returns the
// response and its body.
func (f *restFixture) export() (*http.Response, string) {
	f.t.Helper()
	req, err := http.NewRequestWithContext(f.t.Context(), http.MethodGet, f.srv.URL()+ipam.CheckpointPath, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	req.SetBasicAuth("admin", "s3cret")
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	return resp, string(body)
}

// importDoc sends POST /contiv/v1/ipam/checkpoint?query with doc as
// admin and returns the status and the body.
func (f *restFixture) importDoc(query, doc string) (int, string) {
	f.t.Helper()
	return f.post(ipam.CheckpointPath+query, doc, admin())
}

// state is what a node shows of its allocations: GET allocations and Dump.
func (f *restFixture) state() (string, map[string]string, map[string]string) {
	f.t.Helper()
	status, allocs := f.srv.Do(http.MethodGet, ipam.AllocationsPath, "", admin())
	if status != http.StatusOK {
		f.t.Fatalf("GET %s: %d %s", ipam.AllocationsPath, status, allocs)
	}
	v4, v6, _ := f.ipam.Dump()
	return allocs, v4, v6
}

// addrsOf is every allocated address of f's IPAM with its owner (Dump).
func addrsOf(f *restFixture) map[string]string {
	v4, v6, _ := f.ipam.Dump()
	out := map[string]string{}
	for _, m := range []map[string]string{v4, v6} {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// populate gives a dual-stack node a pod (an attachment), an owner's
// allocations of both families (one per address) and a reservation of an
// IPv4 address.
func populate(g Gomega, f *restFixture) {
	_, err := addPod(f.ipam, pod1, att("c1", "eth0"))
	g.Expect(err).NotTo(HaveOccurred())
	_, _, err = f.ipam.AllocateNext("", "router")
	g.Expect(err).NotTo(HaveOccurred())
	_, _, err = f.ipam.AllocateNextWithExpiration("ipv4", "health", 5*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
}

// Without client authentication both calls are refused with 403 naming
// the keys that enable them, logged at Warn; nothing is changed.
func TestCheckpointCallsNeedClientAuthentication(t *testing.T) {
	g := NewWithT(t)
	f := newStoredFixture(t, restOpts{yaml: dualStackConfig})
	populate(g, f)
	const refused = `{"error": "the checkpoint calls reveal and replace every allocation of the node and need client authentication; ` +
		`set client-basic-auth, or client-cert-files with server-cert-file and server-key-file in http.conf", "reason": "forbidden"}`
	status, body := f.srv.Do(http.MethodGet, ipam.CheckpointPath, "", admin())
	g.Expect(status).To(Equal(http.StatusForbidden))
	g.Expect(body).To(MatchJSON(refused))
	g.Expect(body).NotTo(ContainSubstring("1.2.128"), "nothing of the node is revealed")

	status, body = f.importDoc("?replace=true", `{"version": "contiv-ipam/2", "allocations": []}`)
	g.Expect(status).To(Equal(http.StatusForbidden))
	g.Expect(body).To(MatchJSON(refused))
	g.Expect(addrsOf(f)).To(HaveLen(5), "nothing was dropped")

	logged := f.log.records("checkpoint call refused: the REST server does not authenticate its clients")
	g.Expect(logged).To(HaveLen(2))
	g.Expect(logged[0]).To(HaveKeyWithValue("level", "WARN"))
	g.Expect(logged[0]).To(HaveKeyWithValue("op", "export"))
	g.Expect(logged[1]).To(HaveKeyWithValue("op", "import"))
	g.Expect(logged[1]).To(HaveKeyWithValue("status", 403.0))
}

// The export of a dual-stack node with a pod, an owner's allocation and a
// reservation: the document as a file, every allocation in it.
func TestCheckpointExport(t *testing.T) {
	g := NewWithT(t)
	clk := newFakeClock()
	f := newStoredFixture(t, authOpts(dualStackConfig, clk))
	populate(g, f)

	resp, body := f.export()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK), body)
	g.Expect(resp.Header.Get("Content-Type")).To(Equal("application/json"))
	g.Expect(resp.Header.Get("Content-Disposition")).To(Equal(
		`attachment; filename="contiv-ipam-` + thisNode + `-` + clk.Now().UTC().Format("20060102T150405Z") + `.json"`))
	g.Expect(resp.Header.Get("Cache-Control")).To(Equal("no-store"))
	d, err := checkpoint.Decode([]byte(body))
	g.Expect(err).NotTo(HaveOccurred())
	again, err := checkpoint.Encode(d)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(again)).To(Equal(body), "the body is what Encode writes")
	g.Expect(d.Node).To(Equal(thisNode))
	g.Expect(d.TakenAt).To(Equal(clk.Now().UTC()))
	g.Expect(d.Allocations).To(HaveLen(4))

	pod := d.Allocations[0]
	g.Expect(pod.Network).To(Equal("net"))
	g.Expect(pod.ContainerID).To(Equal("c1"))
	g.Expect(pod.IfName).To(Equal("eth0"))
	g.Expect(pod.Pod).To(Equal(&checkpoint.Pod{Name: "pod1", Namespace: "default"}))
	g.Expect(pod.IPs).To(Equal([]string{"1.2.128.18", "fe10:f00d::a"}))
	g.Expect(pod.Pools).To(Equal([]string{"1.2.128.16/28", "fe10:f00d::8/125"}))
	g.Expect(pod.Reservation).To(BeNil())

	// The router's AllocateNext(""): one allocation per address.
	router, router6 := d.Allocations[1], d.Allocations[3]
	g.Expect(router.Owner).To(Equal("router"))
	g.Expect(router.Seq).To(BeNumerically(">", 0))
	g.Expect(router.IPs).To(Equal([]string{"1.2.128.19"}))
	g.Expect(router.Reservation).To(BeNil())
	g.Expect(router6.Owner).To(Equal("router"))
	g.Expect(router6.Seq).To(Equal(router.Seq + 1))
	g.Expect(router6.IPs).To(Equal([]string{"fe10:f00d::b"}))

	health := d.Allocations[2]
	g.Expect(health.Owner).To(Equal("health"))
	g.Expect(health.IPs).To(Equal([]string{"1.2.128.20"}))
	g.Expect(health.Reservation).NotTo(BeNil())
	g.Expect(health.Reservation.ID).NotTo(BeEmpty())
	g.Expect(health.Reservation.Deadline).To(Equal(clk.Now().Add(5 * time.Minute).UTC()))

	logged := f.log.records("checkpoint call")
	g.Expect(logged).To(HaveLen(1))
	g.Expect(logged[0]).To(HaveKeyWithValue("level", "INFO"))
	g.Expect(logged[0]).To(HaveKeyWithValue("op", "export"))
	g.Expect(logged[0]).To(HaveKeyWithValue("allocations", 4.0))
	g.Expect(logged[0]).To(HaveKeyWithValue("bytes", float64(len(body))))
	g.Expect(logged[0]).To(HaveKeyWithValue("user", "admin"))
	g.Expect(logged[0]).To(HaveKeyWithValue("remote", HavePrefix("127.0.0.1:")))
}

// Export from one node, import on a fresh one: the same allocations
// (GET allocations, Dump), the reservation still expiring.
func TestCheckpointImportReproducesTheAllocations(t *testing.T) {
	g := NewWithT(t)
	clk := newFakeClock()
	src := newStoredFixture(t, authOpts(dualStackConfig, clk))
	populate(g, src)
	wantAllocs, wantV4, wantV6 := src.state()
	_, doc := src.export()

	dst := newStoredFixture(t, authOpts(dualStackConfig, clk))
	status, body := dst.importDoc("", doc)
	g.Expect(status).To(Equal(http.StatusOK), body)
	g.Expect(body).To(MatchJSON(`{"imported": 4, "skipped": 0, "skippedReasons": []}`))
	allocs, v4, v6 := dst.state()
	g.Expect(allocs).To(MatchJSON(wantAllocs))
	g.Expect(v4).To(Equal(wantV4))
	g.Expect(v6).To(Equal(wantV6))
	_, again := dst.export()
	g.Expect(again).To(Equal(doc), "the same document, the same time of the same clock")

	logged := dst.log.records("checkpoint call")
	g.Expect(logged).To(HaveLen(2))
	g.Expect(logged[0]).To(HaveKeyWithValue("op", "import"))
	g.Expect(logged[0]).To(HaveKeyWithValue("replace", false))
	g.Expect(logged[0]).To(HaveKeyWithValue("imported", 4.0))
	g.Expect(logged[0]).To(HaveKeyWithValue("skipped", 0.0))
	g.Expect(logged[0]).To(HaveKeyWithValue("allocations", 4.0))
	g.Expect(logged[0]).To(HaveKeyWithValue("node", thisNode))
	g.Expect(logged[0]).To(HaveKeyWithValue("user", "admin"))

	clk.Advance(5 * time.Minute)
	g.Eventually(func() map[string]string { v4, _, _ := dst.ipam.Dump(); return v4 }).ShouldNot(HaveKey("1.2.128.20"),
		"the imported reservation expires at its deadline")
}

// Entries outside this node's pod subnets are skipped and named.
func TestCheckpointImportSkipsForeignEntries(t *testing.T) {
	g := NewWithT(t)
	f := newStoredFixture(t, authOpts(dualStackConfig, nil))
	status, body := f.importDoc("?replace=false", `{"version": "contiv-ipam/2", "allocations": [
		{"owner": "a", "seq": 1, "ips": ["1.2.128.21"]},
		{"owner": "b", "seq": 1, "ips": ["10.9.9.9"]}]}`)
	g.Expect(status).To(Equal(http.StatusOK), body)
	var got ipam.CheckpointImport
	g.Expect(json.Unmarshal([]byte(body), &got)).To(Succeed())
	g.Expect(got.Imported).To(Equal(1))
	g.Expect(got.Skipped).To(Equal(1))
	g.Expect(got.SkippedReasons).To(ConsistOf(And(HavePrefix("allocations[1]: "), ContainSubstring("10.9.9.9"))))
	g.Expect(addrsOf(f)).To(Equal(map[string]string{"1.2.128.21": "a"}))
}

// A document of version 1 (a single-stack agent's) is migrated and
// imported.
func TestCheckpointImportOfAVersion1Document(t *testing.T) {
	g := NewWithT(t)
	f := newStoredFixture(t, authOpts(defaultTestConfig, nil))
	status, body := f.importDoc("?replace=false", `{"version": "contiv-ipam/1", "node": "old", "takenAt": "2025-06-01T08:30:00Z", "allocations": [
		{"network": "net", "containerId": "c1", "ifName": "eth0", "pod": {"name": "pod1", "namespace": "default"}, "ip": "1.2.128.10"},
		{"pod": {"name": "pod2", "namespace": "default"}, "ip": "1.2.128.11"}]}`)
	g.Expect(status).To(Equal(http.StatusOK), body)
	g.Expect(body).To(MatchJSON(`{"imported": 2, "skipped": 0, "skippedReasons": []}`))
	g.Expect(addrsOf(f)).To(Equal(map[string]string{"1.2.128.10": "default/pod1 net/c1/eth0", "1.2.128.11": "default/pod2"}))
}

// replace=false on a node holding allocations is 409 not-empty and
// changes nothing; replace=true drops them first.
func TestCheckpointImportIntoANonEmptyNode(t *testing.T) {
	g := NewWithT(t)
	f := newStoredFixture(t, authOpts(dualStackConfig, nil))
	populate(g, f)
	before := addrsOf(f)
	doc := `{"version": "contiv-ipam/2", "allocations": [{"owner": "a", "seq": 1, "ips": ["1.2.128.25"]}]}`
	for _, q := range []string{"", "?replace=false"} {
		status, body := f.importDoc(q, doc)
		g.Expect(status).To(Equal(http.StatusConflict), body)
		g.Expect(body).To(MatchJSON(`{"error": "importing a checkpoint: 4 allocations held: the node holds allocations: import with replace to drop them", "reason": "not-empty"}`))
	}
	g.Expect(addrsOf(f)).To(Equal(before))
	failed := f.log.records("checkpoint call failed")
	g.Expect(failed).To(HaveLen(2))
	g.Expect(failed[0]).To(HaveKeyWithValue("status", 409.0))
	g.Expect(failed[0]).To(HaveKeyWithValue("error", ContainSubstring("the node holds allocations")))

	status, body := f.importDoc("?replace=true", doc)
	g.Expect(status).To(Equal(http.StatusOK), body)
	g.Expect(addrsOf(f)).To(Equal(map[string]string{"1.2.128.25": "a"}))
}

// Documents and requests refused before anything is imported.
func TestCheckpointImportRefusals(t *testing.T) {
	f := newStoredFixture(t, authOpts(defaultTestConfig, nil))
	for _, tc := range []struct {
		name, query, doc string
		header           http.Header
		status           int
		body             string
	}{
		{name: "newer version", doc: `{"version": "contiv-ipam/3", "allocations": [], "shards": []}`, status: http.StatusConflict,
			body: `{"error": "checkpoint written by a newer version of the format: version \"contiv-ipam/3\"; this code reads up to \"contiv-ipam/2\"", "reason": "newer-version"}`},
		{name: "garbage", doc: `garbage`, status: http.StatusBadRequest,
			body: `{"error": "invalid checkpoint: the document: invalid JSON: invalid character 'g' looking for beginning of value", "reason": "bad-request"}`},
		{name: "another format", doc: `{"version": "vpc-cni-ipam/1", "allocations": []}`, status: http.StatusBadRequest,
			body: `{"error": "invalid checkpoint: field \"version\": \"vpc-cni-ipam/1\" is not a version of this format: want \"contiv-ipam/2\" (or \"contiv-ipam/1\")", "reason": "bad-request"}`},
		{name: "a bad entry", doc: `{"version": "contiv-ipam/2", "allocations": [{"owner": "a", "seq": 1, "ips": ["1.2.128.300"]}]}`, status: http.StatusBadRequest,
			body: `{"error": "invalid checkpoint: allocations[0]: field \"ips[0]\": \"1.2.128.300\" is not an IP address", "reason": "bad-request"}`},
		{name: "replace not a boolean", query: "?replace=yes", doc: `{}`, status: http.StatusBadRequest,
			body: `{"error": "query: replace=\"yes\": want true or false", "reason": "bad-request"}`},
		{name: "replace twice", query: "?replace=true&replace=true", doc: `{}`, status: http.StatusBadRequest,
			body: `{"error": "query: \"replace\" given twice", "reason": "bad-request"}`},
		{name: "unknown parameter", query: "?force=1", doc: `{}`, status: http.StatusBadRequest,
			body: `{"error": "query: unknown parameter \"force\" (the import takes \"replace\")", "reason": "bad-request"}`},
		{name: "not JSON", doc: `{}`, header: http.Header{"Content-Type": {"text/plain"}}, status: http.StatusUnsupportedMediaType,
			body: `{"error": "Content-Type \"text/plain\": want Content-Type: application/json", "reason": "unsupported-media"}`},
		{name: "too large", doc: `{"version": "contiv-ipam/2", "node": "` + strings.Repeat("x", 16<<20) + `"}`, status: http.StatusRequestEntityTooLarge,
			body: `{"error": "body: longer than 16777216 bytes", "reason": "too-large"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			h := admin()
			if tc.header != nil {
				h.Set("Content-Type", tc.header.Get("Content-Type"))
				status, body := f.srv.Do(http.MethodPost, ipam.CheckpointPath+tc.query, tc.doc, h)
				g.Expect(status).To(Equal(tc.status), body)
				g.Expect(body).To(MatchJSON(tc.body))
				return
			}
			status, body := f.importDoc(tc.query, tc.doc)
			g.Expect(status).To(Equal(tc.status), body)
			g.Expect(body).To(MatchJSON(tc.body))
		})
	}
	g := NewWithT(t)
	_, v4, _ := f.state()
	g.Expect(v4).To(BeEmpty())
}

// Before the first resync both calls are 503.
func TestCheckpointIsNotReadyBeforeTheFirstResync(t *testing.T) {
	g := NewWithT(t)
	f := newStoredFixture(t, restOpts{noSync: true, rest: []rest.Option{basicAuthConf()}})
	resp, body := f.export()
	g.Expect(resp.StatusCode).To(Equal(http.StatusServiceUnavailable), body)
	g.Expect(body).To(MatchJSON(`{"error": "IPAM is not initialised yet: no resync processed", "reason": "not-ready"}`))
	status, body := f.importDoc("", `{"version": "contiv-ipam/2", "allocations": []}`)
	g.Expect(status).To(Equal(http.StatusServiceUnavailable), body)
	g.Expect(body).To(MatchJSON(`{"error": "IPAM is not initialised yet: no resync processed", "reason": "not-ready"}`))
}

// GET and POST only, listed in the index.
func TestCheckpointMethods(t *testing.T) {
	g := NewWithT(t)
	f := newStoredFixture(t, authOpts(defaultTestConfig, nil))
	for _, method := range []string{http.MethodPut, http.MethodDelete, http.MethodPatch} {
		status, body := f.srv.Do(method, ipam.CheckpointPath, "", admin())
		g.Expect(status).To(Equal(http.StatusMethodNotAllowed), "%s: %s", method, body)
	}
	var methods []string
	for _, ep := range f.srv.Plugin.Endpoints() {
		if ep.Path == ipam.CheckpointPath {
			g.Expect(ep.Description).To(ContainSubstring("needs client authentication"))
			methods = append(methods, ep.Method)
		}
	}
	g.Expect(methods).To(ConsistOf(http.MethodGet, http.MethodPost))
}

// A node's own export imported back with replace=true (restoring a
// backup onto the node it came from): the same allocations.
func TestCheckpointRestoreOntoTheSameNode(t *testing.T) {
	g := NewWithT(t)
	clk := newFakeClock()
	f := newStoredFixture(t, authOpts(dualStackConfig, clk))
	populate(g, f)
	wantAllocs, wantV4, wantV6 := f.state()
	_, doc := f.export()
	status, body := f.importDoc("?replace=true", doc)
	g.Expect(status).To(Equal(http.StatusOK), body)
	g.Expect(body).To(MatchJSON(`{"imported": 4, "skipped": 0, "skippedReasons": []}`))
	allocs, v4, v6 := f.state()
	g.Expect(allocs).To(MatchJSON(wantAllocs))
	g.Expect(v4).To(Equal(wantV4))
	g.Expect(v6).To(Equal(wantV6))
}
