package ipam

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/contiv-ipam/agent/infra/rest"
	"github.com/contiv-ipam/agent/plugins/ipam/addressing"
	"github.com/contiv-ipam/agent/plugins/ipam/keeper"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

//go:embed statuspage.html
var statusFiles embed.FS

// The status page's drawing: a pool bar is barWidth px at 100 %, the
// chart a column of minuteWidth px per minute, chartHeight px high at its
// highest minute.
const (
	barWidth    = 360
	minuteWidth = 10
	chartHeight = 100
	// warnFill and critFill are the fills (%) above which a bar turns
	// amber and red.
	warnFill = 80
	critFill = 95
)

// statusPage is the agent's HTML page at GET / (rest.SetIndexPage): the
// node's addressing, the pools' fill, the allocations and releases of
// the last hour, the last CNI errors, reservations, cooldowns and release
// candidates, and links to every endpoint. It reads snapshots (the
// addressing pointer, one inspection of the keeper that does not wait for
// the writes in flight, the candidates, its two rings), never a store.
type statusPage struct {
	p    *Plugin
	tmpl *template.Template
	// series and errors are written by the keeper's goroutine and the
	// CNI calls; each has its own mutex.
	series series
	errors cniErrors
	bufs   sync.Pool // *bytes.Buffer, the rendered page
}

func newStatusPage(p *Plugin) (*statusPage, error) {
	tmpl, err := template.ParseFS(statusFiles, "statuspage.html")
	if err != nil {
		return nil, fmt.Errorf("status page template: %w", err)
	}
	return &statusPage{p: p, tmpl: tmpl, bufs: sync.Pool{New: func() any { return new(bytes.Buffer) }}}, nil
}

// serve is the rest.IndexPageFunc.
func (s *statusPage) serve(w http.ResponseWriter, _ *http.Request, endpoints []rest.Endpoint) {
	v := s.view(s.p.clock.Now(), endpoints)
	buf := s.bufs.Get().(*bytes.Buffer)
	buf.Reset()
	defer s.bufs.Put(buf)
	if err := s.tmpl.Execute(buf, v); err != nil {
		http.Error(w, "rendering the status page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'")
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(buf.Bytes()); err != nil {
		s.p.Log.Debug("writing the status page failed", "error", err)
	}
}

// pageView is the data of statuspage.html.
type pageView struct {
	Now      string
	NodeName string
	NotReady string // why there is no addressing yet ("" once there is)
	Node     []fieldView
	Pools    []poolView
	External bool
	Chart    chartView
	Errors   []errorView

	Reservations []resvView
	ReservedMore int // reservations not listed
	Cooling      []coolView
	CoolingMore  int
	CoolingN     int
	Reused       uint64

	Candidates  []candView
	Blocked     string // why absent pods are not released ("": they are)
	GracePeriod string

	Endpoints []endpointView
}

type fieldView struct{ Key, Label, Value string }

type poolView struct {
	CIDR, Family string
	Used, Total  uint64
	Assigned     uint64
	Cooldown     uint64
	Excluded     uint64
	Width        string // the fill's width in px
	Percent      string // "12.5"
	Level        string // ok, warn, crit
	Revoked      bool
}

type chartView struct {
	Width, Height int
	Max           uint32
	Allocs        uint32 // over the hour
	Releases      uint32
	Minutes       []minuteView
	From, To      string
}

type minuteView struct {
	X, AllocX, ReleaseX int
	Label               string
	Allocs, Releases    uint32
	AllocY, AllocH      string
	ReleaseY, ReleaseH  string
}

type errorView struct {
	Time, Method, Pod, Container, Message string
	Code                                  uint32
}

type resvView struct{ Key, Pod, Addrs, Deadline, In string }

type coolView struct{ Addr, Until, In string }

type candView struct {
	Pod, UID, Addrs, MissingSince, ReleaseAt string
	SandboxLives                             bool
}

type endpointView struct {
	rest.Endpoint
	Link bool
}

// view gathers the page at now.
func (s *statusPage) view(now time.Time, endpoints []rest.Endpoint) *pageView {
	p := s.p
	v := &pageView{Now: now.UTC().Format(time.RFC3339), NodeName: p.ServiceLabel.GetAgentLabel()}
	if st := p.st.Load(); st != nil {
		v.Node = nodeFields(st)
	} else {
		v.NotReady = p.notReady().Error()
	}
	ks := p.keeper.Status()
	if !ks.Started && v.NotReady == "" {
		v.NotReady = keeper.ErrNotReady.Error()
	}
	v.External = ks.External
	for _, ps := range ks.Pools {
		v.Pools = append(v.Pools, poolOf(ps, ks.External))
	}
	for _, r := range ks.Reservations {
		v.Reservations = append(v.Reservations, resvView{Key: r.Key, Pod: r.Pod, Addrs: addrList(r.Addrs),
			Deadline: r.Deadline.UTC().Format(time.RFC3339), In: until(now, r.Deadline)})
	}
	v.ReservedMore = ks.ReservedN - len(ks.Reservations)
	for _, c := range ks.Cooling {
		v.Cooling = append(v.Cooling, coolView{Addr: c.Addr.String(), Until: c.Until.UTC().Format(time.RFC3339), In: until(now, c.Until)})
	}
	v.CoolingMore, v.CoolingN, v.Reused = ks.CoolingN-len(ks.Cooling), ks.CoolingN, ks.CooldownReused
	cands, blocked := p.keeper.Candidates()
	v.Blocked, v.GracePeriod = blocked, p.cfg.AbsentPodGracePeriod.String()
	for _, c := range cands {
		v.Candidates = append(v.Candidates, candView{Pod: c.Pod.String(), UID: c.UID, Addrs: addrList(c.Addrs),
			MissingSince: c.MissingSince.UTC().Format(time.RFC3339), ReleaseAt: c.ReleaseAt.UTC().Format(time.RFC3339),
			SandboxLives: c.SandboxLives})
	}
	v.Chart = s.chart(now)
	var fails [cniErrorsLen]podmanager.CNIFailure
	for _, f := range s.errors.latest(fails[:0]) {
		v.Errors = append(v.Errors, errorView{Time: f.Time.UTC().Format(time.RFC3339), Method: strings.ToUpper(f.Method),
			Pod: f.Pod, Container: f.ContainerID, Code: f.Code, Message: f.Message})
	}
	v.Endpoints = make([]endpointView, 0, len(endpoints))
	for _, e := range endpoints {
		v.Endpoints = append(v.Endpoints, endpointView{Endpoint: e, Link: e.Linkable()})
	}
	return v
}

// nodeFields are the node's identity and addressing, the fields of GET
// /contiv/v1/ipam.
func nodeFields(st *addressing.State) []fieldView {
	f := []fieldView{
		{"node-id", "Node ID", strconv.FormatUint(uint64(st.NodeID), 10)},
		{"pod-subnet", "Pod subnet", st.PodThis.String()},
		{"pod-gateway", "Pod gateway", st.PodGW.String()},
		{"nat-loopback", "NAT loopback", st.NatLoop.String()},
	}
	if st.NodeIC.IsValid() {
		if ip, err := addressing.NodeAddress(st.NodeIC, st.NodeID, st.Gateway); err == nil {
			f = append(f, fieldView{"node-ip", "Node IP (interconnect)", ip.String() + " in " + st.NodeIC.String()})
		}
	}
	if ip, err := addressing.NodeAddress(st.Vxlan, st.NodeID, netip.Addr{}); err == nil {
		f = append(f, fieldView{"vxlan", "VXLAN", ip.String() + " in " + st.Vxlan.String()})
	}
	f = append(f, fieldView{"vpp-host", "VPP-host subnet", st.HostThis.String()})
	if sf := st.Second; sf != nil {
		fi := familyInfo(sf, st.NodeID)
		f = append(f, fieldView{"pod-subnet-2", "Pod subnet (2nd family)", fi.PodSubnetThisNode},
			fieldView{"pod-gateway-2", "Pod gateway (2nd family)", fi.PodGatewayIP},
			fieldView{"nat-loopback-2", "NAT loopback (2nd family)", fi.NatLoopbackIP})
		if fi.NodeIP != "" {
			f = append(f, fieldView{"node-ip-2", "Node IP (2nd family)", fi.NodeIP})
		}
		f = append(f, fieldView{"vxlan-2", "VXLAN (2nd family)", fi.VxlanIP})
	}
	return f
}

// poolOf is one pool's bar: used is every address that cannot be handed
// out now (assigned, cooling down, excluded). With an external IPAM the
// pool's size is not known: no bar.
func poolOf(s keeper.PoolStats, external bool) poolView {
	pv := poolView{CIDR: s.CIDR, Family: familyName(s.Family), Total: s.Total, Assigned: s.Assigned,
		Cooldown: s.Cooldown, Excluded: s.Excluded, Revoked: s.Revoked, Width: "0", Percent: "0.0", Level: "ok"}
	pv.Used = s.Assigned + s.Cooldown + s.Excluded
	if external || s.Total == 0 {
		return pv
	}
	frac := float64(pv.Used) / float64(s.Total)
	pv.Width = strconv.FormatFloat(frac*barWidth, 'f', 1, 64)
	pct := frac * 100
	pv.Percent = strconv.FormatFloat(pct, 'f', 1, 64)
	switch {
	case pct > critFill:
		pv.Level = "crit"
	case pct > warnFill:
		pv.Level = "warn"
	}
	return pv
}

func familyName(f keeper.Family) string {
	if f == keeper.IPv6 {
		return "IPv6"
	}
	return "IPv4"
}

// chart draws the series of the hour that ends with now's minute.
func (s *statusPage) chart(now time.Time) chartView {
	var pts [seriesLen]minutePoint
	s.series.last(now, &pts)
	c := chartView{Width: seriesLen * minuteWidth, Height: chartHeight, Minutes: make([]minuteView, seriesLen),
		From: pts[0].Start.UTC().Format("15:04"), To: pts[seriesLen-1].Start.UTC().Format("15:04")}
	for _, p := range pts {
		c.Max = max(c.Max, p.Allocs, p.Releases)
		c.Allocs += p.Allocs
		c.Releases += p.Releases
	}
	scale := 0.0
	if c.Max > 0 {
		scale = float64(chartHeight) / float64(c.Max)
	}
	for i, p := range pts {
		x := i * minuteWidth
		ah, rh := float64(p.Allocs)*scale, float64(p.Releases)*scale
		c.Minutes[i] = minuteView{X: x, AllocX: x + 1, ReleaseX: x + 5, Label: p.Start.UTC().Format("15:04"),
			Allocs: p.Allocs, Releases: p.Releases,
			AllocH: px(ah), AllocY: px(chartHeight - ah), ReleaseH: px(rh), ReleaseY: px(chartHeight - rh)}
	}
	return c
}

func px(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }

func addrList(as []netip.Addr) string {
	var b strings.Builder
	for i, a := range as {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(a.String())
	}
	return b.String()
}

// until says how long from now to t ("in 4m10s", "due").
func until(now, t time.Time) string {
	d := t.Sub(now).Round(time.Second)
	if d <= 0 {
		return "due"
	}
	return "in " + d.String()
}

// registerStatusPage makes the status page the REST server's HTML index
// and the series hear the keeper (called from Init, before the keeper
// starts). A template that does not parse is a bug: it is logged and the
// server keeps its endpoint table.
func (p *Plugin) registerStatusPage() {
	s, err := newStatusPage(p)
	if err != nil {
		p.Log.Error("no status page", "error", err)
		return
	}
	p.page = s
	p.keeper.SetActivity(&s.series)
	rest.SetIndexPage(p.HTTP, s.serve)
}
