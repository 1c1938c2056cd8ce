package ipam_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/contiv-ipam/agent/infra/rest"
	"github.com/contiv-ipam/agent/infra/rest/resttest"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ipam"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// busyNodeConfig gives the node a /24 of pod addresses (252 to hand out)
// and a /64 of the second family.
const busyNodeConfig = `
ipamConfig:
  podSubnetCIDR: 10.128.0.0/14
  podSubnetOneNodePrefixLen: 24
  vppHostSubnetCIDR: 172.30.0.0/16
  vppHostSubnetOneNodePrefixLen: 24
  nodeInterconnectCIDR: 192.168.16.0/24
  vxlanCIDR: 192.168.30.0/24
  dualStack:
    podSubnetCIDR: fd10::/48
    podSubnetOneNodePrefixLen: 64
    vppHostSubnetCIDR: fd30::/48
    vppHostSubnetOneNodePrefixLen: 64
    nodeInterconnectCIDR: fd40::/90
    vxlanCIDR: fd20::/120
    serviceCIDR: fd00:96::/110
`

// The busy node's history: busyPods pods allocated over the last hour
// (busyPods/60 a minute, and one more pod each minute that is deleted
// the same minute), busyMissing of them absent from the Kubernetes state
// (release candidates: the grace period is long), one CNI reservation and
// a CNI error a minute (the ring keeps the last 20).
const (
	busyPods    = 240
	busyMissing = 20
)

// indexCapture is a real REST plugin that also keeps the HTML index page
// a plugin sets, so that a benchmark can serve it without a socket.
type indexCapture struct {
	*rest.Plugin
	page rest.IndexPageFunc
}

func (c *indexCapture) SetIndexPage(fn rest.IndexPageFunc) {
	c.page = fn
	c.Plugin.SetIndexPage(fn)
}

// serveIndex answers GET / as the REST server's index handler does for a
// client that prefers HTML: the endpoint list, fresh, then the page.
func (c *indexCapture) serveIndex(w http.ResponseWriter, r *http.Request) {
	c.page(w, r, c.Endpoints())
}

// busyNode is IPAM on a node with the history above, on a real REST
// plugin; the fake clock stands at the end of the hour.
func busyNode(b *testing.B) *indexCapture {
	b.Helper()
	srv := resttest.New(b)
	web := &indexCapture{Plugin: srv.Plugin}
	conf, err := newContivConf(b, busyNodeConfig)
	if err != nil {
		b.Fatal(err)
	}
	ns := &fakeNodeSync{}
	ns.id.Store(3)
	cfg := ipam.DefaultConfig()
	cfg.AddressCooldown = 5 * time.Minute
	cfg.AbsentPodGracePeriod = 100 * time.Hour
	cfg.CNIReservationTimeout = 2 * time.Hour
	clk := newFakeClock()
	p := ipam.NewPlugin(ipam.UseConf(cfg), ipam.UseClock(clk), ipam.UseDeps(func(d *ipam.Deps) {
		d.Log, d.ContivConf, d.NodeSync, d.ServiceLabel, d.HTTP = slog.New(slog.DiscardHandler), conf, ns, fakeLabel{thisNode}, web
	}))
	if err := p.Init(); err != nil {
		b.Fatal(err)
	}
	if err := p.AfterInit(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Close() })
	if web.page == nil {
		b.Fatal("IPAM set no index page")
	}
	ks := api.KubeStateData{}
	if err := p.Resync(&api.DBResync{KubeState: ks}, ks, 1, nil); err != nil {
		b.Fatal(err)
	}

	var pods []*podmodel.Pod
	for m := range 60 {
		for i := m * busyPods / 60; i < (m+1)*busyPods/60; i++ {
			id := podmodel.ID{Namespace: "default", Name: fmt.Sprintf("web-%03d", i)}
			if _, err := p.AllocatePodIP(id, "", ""); err != nil {
				b.Fatalf("allocating %s: %v", id, err)
			}
			pods = append(pods, &podmodel.Pod{Name: id.Name, Namespace: id.Namespace})
		}
		churn := podmodel.ID{Namespace: "batch", Name: fmt.Sprintf("job-%02d", m)}
		if _, err := p.AllocatePodIP(churn, "", ""); err != nil {
			b.Fatalf("allocating %s: %v", churn, err)
		}
		if err := p.ReleasePodIP(churn); err != nil {
			b.Fatal(err)
		}
		p.CNIFailed(podmanager.CNIFailure{Time: clk.Now(), Method: "add", Pod: "default/crashy-" + fmt.Sprint(m),
			ContainerID: fmt.Sprintf("%064x", m), Code: 11, Message: "no route to the pod's network namespace"})
		if m < 59 {
			clk.Advance(time.Minute)
		}
	}
	if _, _, err := p.AllocateNextWithExpiration("ipv4", "agent-health", time.Hour); err != nil {
		b.Fatal(err)
	}
	for _, pod := range pods {
		id := podmodel.ID{Namespace: pod.Namespace, Name: pod.Name}
		if ip := p.GetPodIP(id); ip != nil {
			pod.IpAddress = ip.IP.String()
		}
	}

	// Absent pods are candidates only with a fresh mirror marker.
	bt := beater{p: p, clock: clk}
	bt.beat(b)
	ks = kubePods(pods[busyMissing:]...)
	if err := p.Resync(&api.DBResync{KubeState: ks}, ks, 2, nil); err != nil {
		b.Fatal(err)
	}
	return web
}

// BenchmarkStatusPage renders the agent's status page (GET / for a
// browser) on a busy dual-stack node: 240 pods in a /24 and a /64, 20
// release candidates, the cooldowns of the last 5 minutes, a reservation,
// the CNI error ring full and every minute of the hour's chart used.
func BenchmarkStatusPage(b *testing.B) {
	web := busyNode(b)
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.Header.Set("Accept", "text/html,application/xhtml+xml,*/*;q=0.8")
	check := httptest.NewRecorder()
	web.serveIndex(check, req)
	if check.Code != http.StatusOK {
		b.Fatalf("GET /: %d %s", check.Code, check.Body)
	}
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		web.serveIndex(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("GET /: %d", w.Code)
		}
	}
	b.ReportMetric(float64(check.Body.Len()), "bytes/page")
}
