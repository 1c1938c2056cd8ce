package ksr

import (
	"encoding/json"
	"html/template"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/net/html"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/infra/rest"
	"github.com/contiv-ipam/agent/infra/rest/resttest"
	"github.com/contiv-ipam/agent/infra/rest/resttest/htmlq"
	"github.com/contiv-ipam/agent/plugins/ksr/model/agentstatus"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	mirrormodel "github.com/contiv-ipam/agent/plugins/ksr/model/mirror"
	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
)

var pageNow = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// agentRecord is a valid status record of node name, ID id, updated age
// before pageNow.
func agentRecord(name string, id uint32, used, total uint64, age time.Duration) *agentstatus.Status {
	return &agentstatus.Status{Version: 1, Node: name, NodeID: id, REST: "http://10.0.0.1:9999", Ready: true,
		Pools: []agentstatus.Pool{{Name: "10.1.0.0/24", Family: 4, Prefix: "10.1.0.0/24", Used: used, Total: total}},
		Pods:  int(used), Updated: pageNow.Add(-age), PeriodSeconds: 30}
}

// nodeView is n as clusterView shows it.
func nodeView(id uint32, name string, ws *watchedStatus) NodeView {
	n := NodeView{ID: id, Name: name, IPs: []string{"192.168.16.1/24"}, State: NodeAbsent}
	if ws != nil {
		describe(&n, *ws, pageNow)
	}
	return n
}

// parsePage parses the page and returns its root; it fails the test on a
// document html cannot read.
func parsePage(t *testing.T, page string) *html.Node {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		t.Fatalf("parse the page: %v", err)
	}
	return doc
}

// find returns every element of doc that match keeps.
func find(doc *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	for n := range doc.Descendants() {
		if n.Type == html.ElementNode && match(n) {
			out = append(out, n)
		}
	}
	return out
}

var attr = htmlq.Attr

func hasClass(n *html.Node, class string) bool {
	return strings.Contains(" "+attr(n, "class")+" ", " "+class+" ")
}

func text(n *html.Node) string {
	var b strings.Builder
	for d := range n.Descendants() {
		if d.Type == html.TextNode {
			b.WriteString(d.Data)
		}
	}
	return b.String()
}

// The page has one heat-map cell per node in node-ID order, a stale node
// hatched and marked, an absent one outlined, a table row per node, the
// mirror's freshness, and escapes a node name that holds markup.
func TestClusterPageRendersEveryNode(t *testing.T) {
	g := NewWithT(t)
	evil := `<script>alert("x")</script>`
	fresh := &watchedStatus{Status: agentRecord("n1", 1, 127, 254, 5*time.Second)}
	stale := &watchedStatus{Status: agentRecord("n2", 2, 10, 254, 10*time.Minute)}
	bad := &watchedStatus{Err: "invalid agent status: version 2"}
	v := ClusterView{Now: pageNow, Identity: "ksr-a", Leader: "ksr-a", Leading: true,
		Mirror: &MirrorView{Marker: mirrormodel.Marker{Leader: "ksr-a", ResourceVersion: "42", Pods: 7,
			Heartbeat: pageNow.Add(-4 * time.Second), Interval: "10s"}, Revision: 99, AgeSeconds: 4},
		Records: RecordsView{Synced: true, Revision: 120},
		Nodes: []NodeView{nodeView(1, "n1", fresh), nodeView(2, "n2", stale), nodeView(3, "n3", nil),
			nodeView(4, evil, &watchedStatus{Status: agentRecord("x", 4, 0, 254, time.Second)}), nodeView(5, "n5", bad)},
	}
	var b strings.Builder
	g.Expect(renderClusterPage(&b, v, []rest.Endpoint{{Method: http.MethodGet, Path: ClusterPath}})).To(Succeed())
	page := b.String()
	doc := parsePage(t, page)

	cells := find(doc, func(n *html.Node) bool { return n.Data == "g" && hasClass(n, "node-cell") })
	g.Expect(cells).To(HaveLen(5), "one cell per node")
	var ids []string
	for _, c := range cells {
		ids = append(ids, attr(c, "data-id"))
	}
	g.Expect(ids).To(Equal([]string{"1", "2", "3", "4", "5"}), "sorted by node ID")
	g.Expect(hasClass(cells[0], NodeFresh)).To(BeTrue())
	g.Expect(text(cells[0])).To(ContainSubstring("n1 (ID 1): 127/254 used (50%), fresh"))
	g.Expect(hasClass(cells[1], NodeStale)).To(BeTrue(), "the stale node is marked")
	rect := find(cells[1], func(n *html.Node) bool { return n.Data == "rect" })
	g.Expect(rect).To(HaveLen(1))
	g.Expect(attr(rect[0], "fill")).To(Equal("url(#hatch)"), "the stale node is hatched")
	g.Expect(attr(find(cells[0], func(n *html.Node) bool { return n.Data == "rect" })[0], "fill")).To(Equal("hsl(60, 70%, 45%)"),
		"half full is yellow")
	g.Expect(hasClass(cells[2], NodeAbsent)).To(BeTrue())
	g.Expect(attr(find(cells[2], func(n *html.Node) bool { return n.Data == "rect" })[0], "stroke-dasharray")).NotTo(BeEmpty())
	g.Expect(hasClass(cells[4], NodeInvalid)).To(BeTrue())

	// The markup in a node name is text, never an element.
	g.Expect(find(doc, func(n *html.Node) bool { return n.Data == "script" })).To(BeEmpty())
	g.Expect(page).NotTo(ContainSubstring("<script>"))
	g.Expect(page).To(ContainSubstring("&lt;script&gt;"))
	g.Expect(attr(cells[3], "data-node")).To(Equal(evil), "the parsed attribute is the name itself")

	rows := find(doc, func(n *html.Node) bool { return n.Data == "tr" && hasClass(n, "node-row") })
	g.Expect(rows).To(HaveLen(5))
	g.Expect(text(rows[0])).To(ContainSubstring("192.168.16.1/24"))
	g.Expect(text(rows[0])).To(ContainSubstring("yes"))
	g.Expect(text(rows[0])).To(ContainSubstring("5s"))
	g.Expect(text(rows[1])).To(ContainSubstring("10m0s (stale)"))
	g.Expect(text(rows[1])).To(ContainSubstring("unknown (last said yes)"), "a stale record's readiness is not vouched for")
	g.Expect(text(rows[2])).To(ContainSubstring("absent"))
	g.Expect(text(rows[4])).To(ContainSubstring("version 2"))

	fr := find(doc, func(n *html.Node) bool { return attr(n, "id") == "mirror-freshness" })
	g.Expect(fr).To(HaveLen(1))
	g.Expect(hasClass(fr[0], "fresh")).To(BeTrue())
	g.Expect(text(fr[0])).To(ContainSubstring("heartbeat 2026-11-29T11:59:56Z, 4s ago (every 10s)"))
	mirror := find(doc, func(n *html.Node) bool { return attr(n, "id") == "mirror" })
	g.Expect(text(mirror[0])).To(ContainSubstring("leader"))
	g.Expect(text(find(doc, func(n *html.Node) bool { return attr(n, "id") == "mirror-revision" })[0])).To(Equal("99"))
	g.Expect(find(doc, func(n *html.Node) bool { return n.Data == "a" && attr(n, "href") == ClusterPath })).To(HaveLen(1),
		"the endpoints are listed")
	// No JavaScript, no external resources.
	g.Expect(find(doc, func(n *html.Node) bool {
		return n.Data == "link" || n.Data == "img" || n.Data == "iframe" || attr(n, "src") != ""
	})).To(BeEmpty())
}

// Without a marker or nodes the page still renders, saying so.
func TestClusterPageEmpty(t *testing.T) {
	g := NewWithT(t)
	var b strings.Builder
	g.Expect(renderClusterPage(&b, ClusterView{Now: pageNow, Nodes: []NodeView{}, Errors: []string{"node IDs: etcd down"}}, nil)).To(Succeed())
	doc := parsePage(t, b.String())
	g.Expect(find(doc, func(n *html.Node) bool { return hasClass(n, "node-cell") })).To(BeEmpty())
	fr := find(doc, func(n *html.Node) bool { return attr(n, "id") == "mirror-freshness" })
	g.Expect(text(fr[0])).To(ContainSubstring("none in etcd"))
	g.Expect(text(doc)).To(ContainSubstring("etcd down"))
	g.Expect(text(doc)).To(ContainSubstring("0 nodes"))
}

// contiv-ksr joins the node-ID records with the agents' status records it
// watches: fresh, stale, absent, invalid, and a record without an ID
// record; a deleted record makes its node absent; the HTML page shows the
// same nodes, and so does GET / for a browser.
func TestNodesStatusJoinsIDsAndRecords(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	client := fake.NewClientset(testNode("n1", "10.1.1.0/24"), testNode("n2", "10.1.2.0/24"), testNode("n3", "10.1.3.0/24"))
	p := startKSR(t, newDB(t, srv), client, "replica-a", testConfig())
	leading(t, p)

	for id, name := range map[uint32]string{1: "n1", 2: "n2", 3: "n3"} {
		b, err := codec.Marshal(&vppnode.VppNode{Id: id, Name: name, IpAddresses: []string{"192.168.16." + string(rune('0'+id)) + "/24"}})
		g.Expect(err).NotTo(HaveOccurred())
		_, err = cli.Put(t.Context(), codec.KSRPrefix+vppnode.Key(id), string(b))
		g.Expect(err).NotTo(HaveOccurred())
	}
	now := time.Now()
	for _, st := range []*agentstatus.Status{
		agentRecord("n1", 1, 3, 254, 0), agentRecord("n2", 2, 200, 254, 0), agentRecord("n4", 4, 1, 254, 0),
	} {
		st.Updated = now
		if st.Node == "n2" {
			st.Updated = now.Add(-time.Hour)
		}
		b, err := st.Encode()
		g.Expect(err).NotTo(HaveOccurred())
		_, err = cli.Put(t.Context(), agentstatus.Key(st.Node), string(b))
		g.Expect(err).NotTo(HaveOccurred())
	}
	_, err := cli.Put(t.Context(), agentstatus.Key("n5"), `{"version":2}`)
	g.Expect(err).NotTo(HaveOccurred())

	view := func(g Gomega) ClusterView {
		w := serve(p, p.nodesStatusHandler, http.MethodGet)
		g.Expect(w.Code).To(Equal(http.StatusOK))
		var v ClusterView
		g.Expect(json.Unmarshal(w.Body.Bytes(), &v)).To(Succeed())
		return v
	}
	states := func(v ClusterView) map[string]string {
		out := map[string]string{}
		for _, n := range v.Nodes {
			out[n.Name] = n.State
		}
		return out
	}
	g.Eventually(func(g Gomega) map[string]string { return states(view(g)) }, 5*time.Second, 50*time.Millisecond).Should(Equal(
		map[string]string{"n1": NodeFresh, "n2": NodeStale, "n3": NodeAbsent, "n4": NodeFresh, "n5": NodeInvalid}))
	v := view(g)
	var order []uint32
	for _, n := range v.Nodes {
		order = append(order, n.ID)
	}
	g.Expect(order).To(Equal([]uint32{1, 2, 3, 4, 0}), "by node ID; n4's from its record, n5 has none")
	g.Expect(v.Nodes[0].IPs).To(Equal([]string{"192.168.16.1/24"}))
	g.Expect(v.Nodes[0].Used).To(Equal(uint64(3)))
	g.Expect(v.Nodes[0].Status.REST).To(Equal("http://10.0.0.1:9999"))
	g.Expect(v.Nodes[3].Error).To(Equal("no node ID record"))
	g.Expect(v.Nodes[4].Error).To(ContainSubstring("version 2"))
	g.Expect(v.Leading).To(BeTrue())
	g.Expect(v.Leader).To(Equal("replica-a"))
	g.Expect(v.Mirror).NotTo(BeNil())
	g.Expect(v.Mirror.Leader).To(Equal("replica-a"))
	g.Expect(v.Mirror.Stale).To(BeFalse())
	g.Expect(v.Mirror.Revision).To(BeNumerically(">", 0))
	g.Expect(v.Records.Synced).To(BeTrue())
	g.Expect(v.Errors).To(BeEmpty())

	_, err = cli.Delete(t.Context(), agentstatus.Key("n1"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) string { return states(view(g))["n1"] }, 5*time.Second, 50*time.Millisecond).Should(Equal(NodeAbsent))

	w := serve(p, p.clusterPageHandler, http.MethodGet)
	g.Expect(w.Code).To(Equal(http.StatusOK))
	g.Expect(w.Header().Get("Content-Type")).To(HavePrefix("text/html"))
	doc := parsePage(t, w.Body.String())
	g.Expect(find(doc, func(n *html.Node) bool { return n.Data == "g" && hasClass(n, "node-cell") })).To(HaveLen(5))

	// contiv-ksr reads the status records, never writes them.
	resp, err := cli.Get(t.Context(), agentstatus.Prefix, clientv3.WithPrefix())
	g.Expect(err).NotTo(HaveOccurred())
	for _, kv := range resp.Kvs {
		g.Expect(kv.Version).To(Equal(int64(1)), "%s written once, by the test", kv.Key)
	}
}

// On contiv-ksr's REST server the page is GET /contiv/v1/ksr/cluster and,
// for a browser, GET /; the JSON index stays for JSON clients.
func TestClusterPageIsTheIndexForBrowsers(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	web := resttest.New(t)
	p := startKSR(t, newDB(t, srv), fake.NewClientset(testNode("n1", "10.1.1.0/24")), "replica-a", testConfig(),
		UseDeps(func(d *Deps) { d.HTTP = web.Plugin }))
	leading(t, p)

	code, body := web.Get(ClusterPath)
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(body).To(ContainSubstring(`<svg id="heatmap"`))
	code, body = web.Do(http.MethodGet, "/", "", http.Header{"Accept": {"text/html,application/xhtml+xml"}})
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(body).To(ContainSubstring(`<svg id="heatmap"`))
	g.Expect(body).To(ContainSubstring(`href="`+NodesStatusPath+`"`), "the endpoints are listed under the page")
	code, body = web.Do(http.MethodGet, "/", "", http.Header{"Accept": {"application/json"}})
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(body).NotTo(ContainSubstring("<svg"))
	g.Expect(body).To(ContainSubstring(NodesStatusPath))
	code, body = web.Get(NodesStatusPath)
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(body).To(ContainSubstring(`"identity": "replica-a"`))
}

// The hand-written cells and rows escape every string from the records,
// as html/template escapes it: a node name, an address, a REST URL and an
// error holding "<>&'+ come back from the parsed page as they were, and
// the page never holds them raw.
func TestClusterPageEscapesEveryNodeField(t *testing.T) {
	g := NewWithT(t)
	const bad = `"<x y='1'>&amp;+</x>`
	st := agentRecord("name"+bad, 7, 1, 254, time.Second)
	st.REST = "http://10.0.0.1:9999/" + bad
	n := nodeView(7, "name"+bad, &watchedStatus{Status: st})
	n.IPs = []string{"ip" + bad, "10.0.0.2/24"}
	invalid := nodeView(8, "n8", &watchedStatus{Err: "error" + bad})
	var b strings.Builder
	g.Expect(renderClusterPage(&b, ClusterView{Now: pageNow, Nodes: []NodeView{n, invalid}}, nil)).To(Succeed())
	page := b.String()
	g.Expect(page).NotTo(ContainSubstring(bad), "every copy of the payload is escaped")
	g.Expect(strings.Count(page, `&#34;&lt;x y=&#39;1&#39;&gt;&amp;amp;&#43;&lt;/x&gt;`)).To(Equal(7),
		"the name (cell's data-node and title, row's data-node and cell), the address, the REST URL, the error: escaped")
	doc := parsePage(t, page)

	cell := find(doc, func(n *html.Node) bool { return hasClass(n, "node-cell") })[0]
	g.Expect(attr(cell, "data-node")).To(Equal("name" + bad))
	g.Expect(text(cell)).To(HavePrefix("name" + bad + " (ID 7)"))
	rows := find(doc, func(n *html.Node) bool { return hasClass(n, "node-row") })
	g.Expect(attr(rows[0], "data-node")).To(Equal("name" + bad))
	var tds []string
	for _, td := range find(rows[0], func(n *html.Node) bool { return n.Data == "td" }) {
		tds = append(tds, text(td))
	}
	g.Expect(tds).To(Equal([]string{"7", "name" + bad, "ip" + bad + ", 10.0.0.2/24", "yes", "1s",
		"1 / 254 (0%)", "1", "0", "http://10.0.0.1:9999/" + bad}))
	g.Expect(find(doc, func(n *html.Node) bool { return n.Data == "x" })).To(BeEmpty(), "no element from the data")
	g.Expect(text(rows[1])).To(ContainSubstring("(error" + bad + ")"))
}

// appendEscaped writes what html/template writes for a string in text
// and in a quoted attribute, for every byte and some runes.
func TestAppendEscapedIsTemplates(t *testing.T) {
	g := NewWithT(t)
	var all []byte
	for c := range 256 {
		all = append(all, byte(c))
	}
	tmpl := template.Must(template.New("t").Parse(`<p title="{{.}}">{{.}}</p>`))
	for _, s := range []string{"", "plain", string(all), "é—\u2028\uFFFD", `"<>&'+`} {
		var want strings.Builder
		g.Expect(tmpl.Execute(&want, s)).To(Succeed())
		esc := string(appendEscaped(nil, s))
		g.Expect(`<p title="`+esc+`">`+esc+`</p>`).To(Equal(want.String()), "%q", s)
	}
}
