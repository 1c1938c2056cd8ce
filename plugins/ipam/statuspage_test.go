package ipam_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"golang.org/x/net/html"

	"github.com/contiv-ipam/agent/infra/rest/resttest"
	"github.com/contiv-ipam/agent/infra/rest/resttest/htmlq"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ipam"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// pageFixture is IPAM (dual stack, a minute of address cooldown, a fake
// clock) on a real REST server, resynced once.
type pageFixture struct {
	t     *testing.T
	ipam  *ipam.Plugin
	srv   *resttest.Server
	clock *fakeClock
}

func newPageFixture(t *testing.T) *pageFixture {
	t.Helper()
	srv := resttest.New(t)
	conf, err := newContivConf(t, dualStackConfig)
	if err != nil {
		t.Fatal(err)
	}
	ns := &fakeNodeSync{}
	ns.id.Store(3)
	cfg := ipam.DefaultConfig()
	cfg.AddressCooldown = time.Minute
	f := &pageFixture{t: t, srv: srv, clock: newFakeClock()}
	f.ipam = ipam.NewPlugin(ipam.UseConf(cfg), ipam.UseClock(f.clock), ipam.UseDeps(func(d *ipam.Deps) {
		d.Log, d.ContivConf, d.NodeSync, d.ServiceLabel, d.HTTP = slog.New(slog.DiscardHandler), conf, ns, fakeLabel{thisNode}, srv.Plugin
	}))
	if err := f.ipam.Init(); err != nil {
		t.Fatal(err)
	}
	if err := f.ipam.AfterInit(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.ipam.Close() })
	ks := api.KubeStateData{}
	if err := f.ipam.Resync(&api.DBResync{KubeState: ks}, ks, 1, nil); err != nil {
		t.Fatal(err)
	}
	return f
}

// page GETs / as a browser does and parses it.
func (f *pageFixture) page() *html.Node {
	f.t.Helper()
	status, body := f.srv.Do(http.MethodGet, "/", "", http.Header{"Accept": {"text/html,application/xhtml+xml,*/*;q=0.8"}})
	if status != http.StatusOK {
		f.t.Fatalf("GET / as a browser: %d %s", status, body)
	}
	doc, err := html.Parse(strings.NewReader(body))
	if err != nil {
		f.t.Fatalf("parsing the status page: %v", err)
	}
	return doc
}

func TestStatusPageWhenNothingHappened(t *testing.T) {
	g := NewWithT(t)
	f := newPageFixture(t)
	doc := f.page()

	g.Expect(text(byID(t, doc, "node-name"))).To(Equal(thisNode))
	g.Expect(fieldValue(t, doc, "node-id")).To(Equal("3"))
	g.Expect(fieldValue(t, doc, "pod-subnet")).To(Equal("1.2.128.48/28"))
	g.Expect(fieldValue(t, doc, "pod-gateway")).To(Equal("1.2.128.49"))
	g.Expect(fieldValue(t, doc, "nat-loopback")).To(Equal("1.2.128.62"))
	g.Expect(fieldValue(t, doc, "node-ip")).To(HavePrefix("3.4.5.195 "))
	g.Expect(fieldValue(t, doc, "vxlan")).To(HavePrefix("4.5.6.195 "))
	g.Expect(fieldValue(t, doc, "pod-subnet-2")).To(Equal("fe10:f00d::18/125"))
	g.Expect(find(doc, hasAttr("id", "not-ready"))).To(BeEmpty())

	pools := find(doc, hasClass("pool"))
	g.Expect(pools).To(HaveLen(2), "one bar per family")
	for _, p := range pools {
		g.Expect(attr(p, "data-used")).To(Equal("0"))
		g.Expect(attr(fillOf(t, p), "width")).To(Equal("0.0"))
	}

	for _, section := range []string{"cni-errors", "reservations", "cooldowns", "candidates"} {
		none := find(byID(t, doc, section), hasClass("none"))
		g.Expect(none).To(HaveLen(1), "section %s", section)
		g.Expect(text(none[0])).To(Equal("none"), "section %s", section)
	}
	minutes := find(doc, hasClass("minute"))
	g.Expect(minutes).To(HaveLen(60))
	for _, m := range minutes {
		g.Expect(attr(m, "data-allocs")).To(Equal("0"))
	}
	g.Expect(text(byID(t, doc, "allocs-hour"))).To(Equal("0"))
	g.Expect(links(doc)).To(ContainElements("/contiv/v1/ipam", "/contiv/v1/ipam/pools", "/"))
	g.Expect(find(doc, isElement("script"))).To(BeEmpty(), "no JavaScript")
	for _, el := range find(doc, func(n *html.Node) bool { return n.Type == html.ElementNode }) {
		for _, a := range []string{"src", "href"} {
			g.Expect(attr(el, a)).NotTo(ContainSubstring("//"), "no external resources: <%s %s=%q>", el.Data, a, attr(el, a))
		}
	}
}

func TestStatusPageShowsAllocationsAndErrors(t *testing.T) {
	g := NewWithT(t)
	f := newPageFixture(t)
	for i := range 3 {
		_, err := f.ipam.AllocatePodIP(podmodel.ID{Namespace: "default", Name: fmt.Sprintf("web-%d", i)}, "", "")
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(f.ipam.ReleasePodIP(podmodel.ID{Namespace: "default", Name: "web-1"})).To(Succeed())
	_, _, err := f.ipam.AllocateNextWithExpiration("ipv4", "agent-health", 10*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	f.ipam.CNIFailed(podmanager.CNIFailure{Time: f.clock.Now(), Method: "add", Pod: "default/<script>alert(1)</script>",
		ContainerID: "c1", Code: 11, Message: `pool "x" <b>exhausted</b>`})

	doc := f.page()
	stats, err := f.ipam.Stats()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stats.Pools).To(HaveLen(2))
	for _, s := range stats.Pools {
		row := find(doc, hasAttr("data-cidr", s.CIDR))
		g.Expect(row).To(HaveLen(1), s.CIDR)
		used := s.Assigned + s.Cooldown + s.Excluded
		g.Expect(attr(row[0], "data-used")).To(Equal(strconv.FormatUint(used, 10)))
		g.Expect(attr(row[0], "data-total")).To(Equal(strconv.FormatUint(s.Total, 10)))
		want := strconv.FormatFloat(float64(used)*360/float64(s.Total), 'f', 1, 64)
		g.Expect(attr(fillOf(t, row[0]), "width")).To(Equal(want), "the bar of %s is its fill", s.CIDR)
	}
	v4 := find(doc, hasAttr("data-family", "IPv4"))[0]
	g.Expect(attr(v4, "data-used")).To(Equal("4"), "2 pods, 1 cooling down, 1 reserved")
	g.Expect(attr(fillOf(t, v4), "width")).To(Equal("120.0"), "4 of 12")
	g.Expect(text(v4)).To(ContainSubstring("4 / 12 (33.3 %)"))
	v6 := find(doc, hasAttr("data-family", "IPv6"))[0]
	g.Expect(attr(v6, "data-used")).To(Equal("3"), "2 pods, 1 cooling down")
	g.Expect(attr(fillOf(t, v6), "width")).To(Equal("270.0"), "3 of 4")
	g.Expect(attr(fillOf(t, v6), "class")).To(Equal("fill ok"), "75 %% is not over 80 %%")

	minutes := find(doc, hasClass("minute"))
	last := minutes[len(minutes)-1]
	g.Expect(attr(last, "data-allocs")).To(Equal("4"), "this minute: 3 pods and 1 owner")
	g.Expect(attr(last, "data-releases")).To(Equal("1"))
	g.Expect(attr(last, "data-minute")).To(Equal(f.clock.Now().UTC().Format("15:04")))
	g.Expect(find(last, hasClass("alloc"))[0]).To(WithTransform(func(n *html.Node) string { return attr(n, "height") }, Equal("100.0")),
		"the highest minute is the chart's height")

	errs := find(doc, hasClass("cni-error"))
	g.Expect(errs).To(HaveLen(1))
	g.Expect(text(find(errs[0], hasClass("pod"))[0])).To(Equal("default/<script>alert(1)</script>"), "shown as text")
	g.Expect(find(doc, isElement("script"))).To(BeEmpty(), "the pod name is escaped, not a script")
	g.Expect(text(errs[0])).To(ContainSubstring(`pool "x" <b>exhausted</b>`))
	g.Expect(find(errs[0], isElement("b"))).To(BeEmpty())

	resv := find(doc, hasClass("reservation"))
	g.Expect(resv).To(HaveLen(1))
	g.Expect(text(resv[0])).To(ContainSubstring("agent-health"))
	g.Expect(text(resv[0])).To(ContainSubstring("in 10m0s"))
	cool := find(doc, hasClass("cooling"))
	g.Expect(cool).To(HaveLen(2), "web-1's two addresses")
	g.Expect(text(cool[0])).To(ContainSubstring("in 1m0s"))
	g.Expect(text(find(byID(t, doc, "candidates"), hasClass("none"))[0])).To(Equal("none"))

	// An hour later the minute has left the chart.
	f.clock.Advance(time.Hour)
	doc = f.page()
	g.Expect(text(byID(t, doc, "allocs-hour"))).To(Equal("0"))
}

func TestStatusPageKeepsTheJSONIndex(t *testing.T) {
	g := NewWithT(t)
	f := newPageFixture(t)
	for _, h := range []http.Header{nil, {"Accept": {"application/json"}}} {
		status, body := f.srv.Do(http.MethodGet, "/", "", h)
		g.Expect(status).To(Equal(http.StatusOK))
		g.Expect(body).To(HavePrefix("{"))
		g.Expect(body).To(ContainSubstring(`"path": "/contiv/v1/ipam"`))
		g.Expect(body).NotTo(ContainSubstring("<html"))
	}
}

func TestStatusPageBeforeTheFirstResync(t *testing.T) {
	g := NewWithT(t)
	srv := resttest.New(t)
	conf, err := newContivConf(t, defaultTestConfig)
	g.Expect(err).NotTo(HaveOccurred())
	p := ipam.NewPlugin(ipam.UseDeps(func(d *ipam.Deps) {
		d.Log, d.ContivConf, d.NodeSync, d.ServiceLabel, d.HTTP = slog.New(slog.DiscardHandler), conf, &fakeNodeSync{}, fakeLabel{thisNode}, srv.Plugin
	}))
	g.Expect(p.Init()).To(Succeed())
	g.Expect(p.AfterInit()).To(Succeed())
	t.Cleanup(func() { _ = p.Close() })
	status, body := srv.Do(http.MethodGet, "/", "", http.Header{"Accept": {"text/html"}})
	g.Expect(status).To(Equal(http.StatusOK))
	doc, err := html.Parse(strings.NewReader(body))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(text(byID(t, doc, "not-ready"))).To(ContainSubstring("Not ready"))
	g.Expect(text(find(byID(t, doc, "pools"), hasClass("none"))[0])).To(Equal("none"))
}

// HTML helpers (htmlq's, under the names these tests use).

var (
	find      = htmlq.Find
	attr      = htmlq.Attr
	hasAttr   = htmlq.ByAttr
	hasClass  = htmlq.ByClass
	isElement = htmlq.ByTag
	text      = htmlq.Text
)

func byID(t *testing.T, doc *html.Node, id string) *html.Node {
	t.Helper()
	ns := find(doc, hasAttr("id", id))
	if len(ns) != 1 {
		t.Fatalf("%d elements with id %q", len(ns), id)
	}
	return ns[0]
}

// fieldValue is the value cell of the node table's row data-field=key.
func fieldValue(t *testing.T, doc *html.Node, key string) string {
	t.Helper()
	rows := find(doc, hasAttr("data-field", key))
	if len(rows) != 1 {
		t.Fatalf("%d node rows %q", len(rows), key)
	}
	return text(find(rows[0], isElement("td"))[0])
}

// fillOf is the filled rect of a pool row's bar.
func fillOf(t *testing.T, row *html.Node) *html.Node {
	t.Helper()
	fills := find(row, hasClass("fill"))
	if len(fills) != 1 {
		t.Fatalf("%d fills in a pool row", len(fills))
	}
	return fills[0]
}

func links(doc *html.Node) []string {
	var out []string
	for _, a := range find(doc, isElement("a")) {
		out = append(out, attr(a, "href"))
	}
	return out
}
