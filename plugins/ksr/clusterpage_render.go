package ksr

import (
	"bytes"
	"html/template"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/contiv-ipam/agent/infra/rest"
)

// The heat map's geometry: square cells in rows of at most heatCols.
const (
	heatCols = 20
	heatSize = 44
	heatGap  = 6
)

// pageData is what the page's frame templates render; the nodes' cells
// and rows are written between them by appendNodeCell and appendNodeRow.
type pageData struct {
	ClusterView
	Width     int
	Height    int
	Endpoints []rest.Endpoint
	Counts    map[string]int
}

// renderClusterPage writes the page of v. The frame is html/template's;
// the per-node parts (a heat-map cell and a table row for each of
// thousands of nodes) are appended by hand, escaping every string with
// appendEscaped (node names, addresses, URLs and errors come from the
// agents' records), to the bytes html/template would write for them.
func renderClusterPage(w io.Writer, v ClusterView, endpoints []rest.Endpoint) error {
	if b, ok := w.(*bytes.Buffer); ok {
		return renderClusterPageTo(b, v, endpoints)
	}
	var b bytes.Buffer
	if err := renderClusterPageTo(&b, v, endpoints); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}

func renderClusterPageTo(b *bytes.Buffer, v ClusterView, endpoints []rest.Endpoint) error {
	d := pageData{ClusterView: v, Endpoints: endpoints, Counts: map[string]int{}}
	for i := range v.Nodes {
		d.Counts[v.Nodes[i].State]++
	}
	cols := min(max(len(v.Nodes), 1), heatCols)
	rows := max((len(v.Nodes)+heatCols-1)/heatCols, 1)
	d.Width, d.Height = cols*(heatSize+heatGap), rows*(heatSize+heatGap)
	if err := pageTemplate.ExecuteTemplate(b, "head", d); err != nil {
		return err
	}
	ages := make([]string, len(v.Nodes))
	for i := range v.Nodes {
		ages[i] = ageText(v.Nodes[i].AgeSeconds)
		// AvailableBuffer: the cell is appended in the buffer's spare
		// room, and Write copies nothing when it fits.
		b.Write(appendNodeCell(b.AvailableBuffer(), i, &v.Nodes[i], ages[i]))
	}
	if err := pageTemplate.ExecuteTemplate(b, "middle", d); err != nil {
		return err
	}
	for i := range v.Nodes {
		b.Write(appendNodeRow(b.AvailableBuffer(), &v.Nodes[i], ages[i]))
	}
	return pageTemplate.ExecuteTemplate(b, "tail", d)
}

// appendNodeCell appends the heat-map cell of n, the i-th node, whose
// age (ageText) is age.
func appendNodeCell(b []byte, i int, n *NodeView, age string) []byte {
	x, y := (i%heatCols)*(heatSize+heatGap), (i/heatCols)*(heatSize+heatGap)
	b = append(b, `<g class="node-cell `...)
	b = appendEscaped(b, n.State)
	b = append(b, `" data-node="`...)
	b = appendEscaped(b, n.Name)
	b = append(b, `" data-id="`...)
	b = strconv.AppendUint(b, uint64(n.ID), 10)
	// The title: name, ID, used/total, state, and the record's age.
	b = append(b, `"><title>`...)
	b = appendEscaped(b, n.Name)
	b = append(b, ` (ID `...)
	b = strconv.AppendUint(b, uint64(n.ID), 10)
	b = append(b, `): `...)
	b = strconv.AppendUint(b, n.Used, 10)
	b = append(b, '/')
	b = strconv.AppendUint(b, n.Total, 10)
	b = append(b, ` used (`...)
	b = strconv.AppendFloat(b, 100*n.Fill(), 'f', 0, 64)
	b = append(b, `%), `...)
	b = appendEscaped(b, n.State)
	if n.State == NodeFresh || n.State == NodeStale {
		b = append(b, `, updated `...)
		b = appendEscaped(b, age)
		b = append(b, ` ago`...)
		if !n.Ready {
			b = append(b, `, not ready`...)
		}
	}
	b = append(b, `</title><rect x="`...)
	b = strconv.AppendInt(b, int64(x), 10)
	b = append(b, `" y="`...)
	b = strconv.AppendInt(b, int64(y), 10)
	b = append(b, `" width="44" height="44" rx="4"`...)
	switch n.State {
	case NodeStale:
		b = append(b, ` fill="url(#hatch)" stroke="#424242"`...)
	case NodeAbsent:
		b = append(b, ` fill="`...)
		b = appendCellColour(b, n)
		b = append(b, `" stroke="#757575" stroke-dasharray="4 3"`...)
	default:
		b = append(b, ` fill="`...)
		b = appendCellColour(b, n)
		b = append(b, `" stroke="#424242"`...)
	}
	b = append(b, `></rect><text x="`...)
	b = strconv.AppendInt(b, int64(x), 10)
	b = append(b, `" y="`...)
	b = strconv.AppendInt(b, int64(y), 10)
	b = append(b, `" dx="22" dy="27" text-anchor="middle">`...)
	b = strconv.AppendUint(b, uint64(n.ID), 10)
	return append(b, "</text></g>\n"...)
}

// appendNodeRow appends the table row of n, whose age (ageText) is age.
func appendNodeRow(b []byte, n *NodeView, age string) []byte {
	const none = "—"
	b = append(b, `<tr class="node-row `...)
	b = appendEscaped(b, n.State)
	b = append(b, `" data-node="`...)
	b = appendEscaped(b, n.Name)
	b = append(b, `"><td>`...)
	if n.ID != 0 {
		b = strconv.AppendUint(b, uint64(n.ID), 10)
	} else {
		b = append(b, none...)
	}
	b = append(b, `</td><td>`...)
	b = appendEscaped(b, n.Name)
	if n.Error != "" {
		b = append(b, ` <span class="bad">(`...)
		b = appendEscaped(b, n.Error)
		b = append(b, `)</span>`...)
	}
	b = append(b, `</td><td>`...)
	for i, ip := range n.IPs {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = appendEscaped(b, ip)
	}
	if len(n.IPs) == 0 {
		b = append(b, none...)
	}
	b = append(b, `</td><td class="ready">`...)
	switch {
	case n.Status == nil:
		b = append(b, none...)
	case n.State == NodeStale && n.Ready:
		b = append(b, `unknown (last said yes)`...)
	case n.State == NodeStale:
		b = append(b, `unknown (last said no)`...)
	case n.Ready:
		b = append(b, `<span class="ok">yes</span>`...)
	default:
		b = append(b, `<span class="bad">no</span>`...)
	}
	b = append(b, `</td><td class="age">`...)
	if n.AgeSeconds != nil {
		b = appendEscaped(b, age)
		if n.State == NodeStale {
			b = append(b, ` <span class="bad">(stale)</span>`...)
		}
	} else {
		b = appendEscaped(b, n.State)
	}
	b = append(b, `</td><td>`...)
	if st := n.Status; st != nil {
		b = strconv.AppendUint(b, n.Used, 10)
		b = append(b, ` / `...)
		b = strconv.AppendUint(b, n.Total, 10)
		b = append(b, ` (`...)
		b = strconv.AppendFloat(b, 100*n.Fill(), 'f', 0, 64)
		b = append(b, `%)</td><td>`...)
		b = strconv.AppendInt(b, int64(st.Pods), 10)
		b = append(b, `</td><td>`...)
		b = strconv.AppendInt(b, int64(st.ReleaseCandidates), 10)
		b = append(b, `</td><td>`...)
		if st.REST != "" {
			b = append(b, `<code>`...)
			b = appendEscaped(b, st.REST)
			b = append(b, `</code>`...)
		} else {
			b = append(b, none...)
		}
	} else {
		b = append(b, none+`</td><td>`+none+`</td><td>`+none+`</td><td>`+none...)
	}
	return append(b, "</td></tr>\n"...)
}

// htmlEscapes are html/template's replacements for text and quoted
// attribute values (its htmlReplacementTable), by byte: every other byte,
// those of multi-byte UTF-8 sequences included, is written as is.
var htmlEscapes = [256]string{
	0:    "\uFFFD",
	'"':  "&#34;",
	'&':  "&amp;",
	'\'': "&#39;",
	'+':  "&#43;",
	'<':  "&lt;",
	'>':  "&gt;",
}

// appendEscaped appends s escaped for HTML text or a quoted attribute
// value, as html/template escapes a string there.
func appendEscaped(b []byte, s string) []byte {
	last := 0
	for i := 0; i < len(s); i++ {
		if r := htmlEscapes[s[i]]; r != "" {
			b = append(b, s[last:i]...)
			b = append(b, r...)
			last = i + 1
		}
	}
	return append(b, s[last:]...)
}

// appendCellColour appends the fill of n's cell: green (empty) to red
// (full) for a fresh node; grey for a stale one (drawn hatched), white
// for an absent one (dashed outline), violet for an invalid record.
func appendCellColour(b []byte, n *NodeView) []byte {
	switch n.State {
	case NodeStale:
		return append(b, "#9e9e9e"...)
	case NodeAbsent:
		return append(b, "#ffffff"...)
	case NodeInvalid:
		return append(b, "#b39ddb"...)
	}
	hue := 120 * (1 - math.Min(1, math.Max(0, n.Fill())))
	b = append(b, "hsl("...)
	b = strconv.AppendFloat(b, hue, 'f', 0, 64)
	return append(b, ", 70%, 45%)"...)
}

// ageText is an age in whole seconds ("—" when unknown).
func ageText(s *float64) string {
	if s == nil {
		return "—"
	}
	return (time.Duration(*s * float64(time.Second))).Round(time.Second).String()
}

// pageTemplate is the page's frame in three parts: "head" up to the heat
// map's cells, "middle" from the heat map's end to the node table's rows,
// "tail" the rest.
var pageTemplate = template.Must(template.New("cluster").Funcs(template.FuncMap{
	"since": func(s float64) string {
		return ageText(&s)
	},
	"rfc3339": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
}).Parse(`{{define "head"}}<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="refresh" content="10">
<title>contiv-ksr: cluster</title>
<style>
body { font-family: sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 1.5em; }
table { border-collapse: collapse; } td, th { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: left; }
th { background: #f0f0f0; } .stale td { color: #777; } .absent td { color: #999; font-style: italic; }
.bad { color: #b00020; font-weight: bold; } .ok { color: #1b5e20; }
.legend span { display: inline-block; margin-right: 1.2em; }
.swatch { display: inline-block; width: 0.9em; height: 0.9em; border: 1px solid #555; vertical-align: middle; }
svg text { font-size: 13px; font-family: sans-serif; pointer-events: none; }
</style>
</head>
<body>
<h1>contiv-ksr: cluster</h1>
<p id="summary">{{len .Nodes}} nodes: {{index .Counts "fresh"}} publishing, {{index .Counts "stale"}} stale, {{index .Counts "absent"}} without a status record{{with index .Counts "invalid"}}, {{.}} invalid{{end}}. Taken {{rfc3339 .Now}} by replica <code>{{.Identity}}</code>.</p>
{{range .Errors}}<p class="bad error">{{.}}</p>
{{end}}
<h2>Mirror</h2>
<table id="mirror">
<tr><th>this replica</th><td>{{if .Leading}}<span class="ok">leader</span>{{else}}standby{{end}}</td></tr>
<tr><th>leader</th><td>{{if .Leader}}<code>{{.Leader}}</code>{{else}}<span class="bad">none</span>{{end}}</td></tr>
{{with .Mirror}}<tr><th>mirror marker</th><td id="mirror-freshness" class="{{if .Stale}}bad stale{{else}}ok fresh{{end}}">{{if .Stale}}stale{{else}}fresh{{end}}: heartbeat {{rfc3339 .Heartbeat}}, {{since .AgeSeconds}} ago (every {{.Interval}})</td></tr>
<tr><th>written by</th><td><code>{{.Leader}}</code></td></tr>
<tr><th>etcd revision</th><td id="mirror-revision">{{.Revision}}</td></tr>
<tr><th>API resource version</th><td>{{.ResourceVersion}}</td></tr>
<tr><th>pods mirrored</th><td>{{.Pods}}</td></tr>
{{else}}<tr><th>mirror marker</th><td id="mirror-freshness" class="bad absent">none in etcd: no leader has completed a mirror</td></tr>
{{end}}<tr><th>status records</th><td>{{if .Records.Synced}}watched at etcd revision {{.Records.Revision}}{{else}}<span class="bad">not listed yet</span>{{end}}{{with .Records.Error}} <span class="bad">({{.}})</span>{{end}}</td></tr>
</table>

<h2>Pod address fill</h2>
<p class="legend"><span><span class="swatch" style="background: hsl(120, 70%, 45%)"></span> empty</span><span><span class="swatch" style="background: hsl(60, 70%, 45%)"></span> half</span><span><span class="swatch" style="background: hsl(0, 70%, 45%)"></span> full</span><span><span class="swatch" style="background: #9e9e9e"></span> stale record</span><span><span class="swatch" style="background: #fff; border-style: dashed"></span> no record</span><span><span class="swatch" style="background: #b39ddb"></span> invalid record</span></p>
<svg id="heatmap" xmlns="http://www.w3.org/2000/svg" width="{{.Width}}" height="{{.Height}}" viewBox="0 0 {{.Width}} {{.Height}}" role="img" aria-label="pod address fill per node">
<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#9e9e9e"></rect><line x1="0" y1="0" x2="0" y2="6" stroke="#616161" stroke-width="3"></line></pattern></defs>
{{end}}{{define "middle"}}</svg>

<h2>Node IDs</h2>
<table id="nodes">
<thead><tr><th>ID</th><th>name</th><th>node IPs</th><th>agent ready</th><th>status age</th><th>used / total</th><th>pods</th><th>release candidates</th><th>REST</th></tr></thead>
<tbody>
{{end}}{{define "tail"}}</tbody>
</table>
{{if .Endpoints}}
<h2>Endpoints</h2>
<ul id="endpoints">
{{range .Endpoints}}<li>{{.Method}} {{if .Linkable}}<a href="{{.Path}}">{{.Path}}</a>{{else}}{{.Path}}{{end}}{{with .Description}} — {{.}}{{end}}</li>
{{end}}</ul>
{{end}}
</body>
</html>
{{end}}`))
