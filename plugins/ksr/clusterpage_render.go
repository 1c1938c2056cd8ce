package ksr

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"time"

	"github.com/contiv-ipam/agent/infra/rest"
)

// The heat map's geometry: square cells in rows of at most heatCols.
const (
	heatCols = 20
	heatSize = 44
	heatGap  = 6
)

// pageData is what the template renders.
type pageData struct {
	ClusterView
	Cells     []heatCell
	Width     int
	Height    int
	Endpoints []rest.Endpoint
	Counts    map[string]int
}

// heatCell is one node's cell of the heat map.
type heatCell struct {
	NodeView
	X, Y   int
	Colour string
	Label  string // the cell's title: name, ID, used/total, state
	Age    string
}

// renderClusterPage writes the page of v (html/template escapes every
// value: node names come from the agents' records).
func renderClusterPage(w io.Writer, v ClusterView, endpoints []rest.Endpoint) error {
	d := pageData{ClusterView: v, Endpoints: endpoints, Counts: map[string]int{}}
	for i, n := range v.Nodes {
		c := heatCell{NodeView: n, X: (i % heatCols) * (heatSize + heatGap), Y: (i / heatCols) * (heatSize + heatGap),
			Colour: cellColour(&n), Age: ageText(n.AgeSeconds)}
		c.Label = fmt.Sprintf("%s (ID %d): %d/%d used (%.0f%%), %s", n.Name, n.ID, n.Used, n.Total, 100*n.Fill(), n.State)
		if n.State == NodeFresh || n.State == NodeStale {
			c.Label += ", updated " + c.Age + " ago"
			if !n.Ready {
				c.Label += ", not ready"
			}
		}
		d.Cells = append(d.Cells, c)
		d.Counts[n.State]++
	}
	cols := min(max(len(v.Nodes), 1), heatCols)
	rows := max((len(v.Nodes)+heatCols-1)/heatCols, 1)
	d.Width, d.Height = cols*(heatSize+heatGap), rows*(heatSize+heatGap)
	return pageTemplate.Execute(w, d)
}

// cellColour is green (empty) to red (full) for a fresh node; grey for a
// stale one (drawn hatched), white for an absent one (dashed outline),
// violet for an invalid record.
func cellColour(n *NodeView) string {
	switch n.State {
	case NodeStale:
		return "#9e9e9e"
	case NodeAbsent:
		return "#ffffff"
	case NodeInvalid:
		return "#b39ddb"
	}
	hue := 120 * (1 - math.Min(1, math.Max(0, n.Fill())))
	return fmt.Sprintf("hsl(%.0f, 70%%, 45%%)", hue)
}

// ageText is an age in whole seconds ("—" when unknown).
func ageText(s *float64) string {
	if s == nil {
		return "—"
	}
	return (time.Duration(*s * float64(time.Second))).Round(time.Second).String()
}

var pageTemplate = template.Must(template.New("cluster").Funcs(template.FuncMap{
	"pct": func(n NodeView) string { return fmt.Sprintf("%.0f%%", 100*n.Fill()) },
	"since": func(s float64) string {
		return ageText(&s)
	},
	"age":     ageText,
	"rfc3339": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
}).Parse(`<!DOCTYPE html>
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
{{range .Cells}}<g class="node-cell {{.State}}" data-node="{{.Name}}" data-id="{{.ID}}"><title>{{.Label}}</title><rect x="{{.X}}" y="{{.Y}}" width="44" height="44" rx="4"{{if eq .State "stale"}} fill="url(#hatch)" stroke="#424242"{{else if eq .State "absent"}} fill="{{.Colour}}" stroke="#757575" stroke-dasharray="4 3"{{else}} fill="{{.Colour}}" stroke="#424242"{{end}}></rect><text x="{{.X}}" y="{{.Y}}" dx="22" dy="27" text-anchor="middle">{{.ID}}</text></g>
{{end}}</svg>

<h2>Node IDs</h2>
<table id="nodes">
<thead><tr><th>ID</th><th>name</th><th>node IPs</th><th>agent ready</th><th>status age</th><th>used / total</th><th>pods</th><th>release candidates</th><th>REST</th></tr></thead>
<tbody>
{{range .Nodes}}<tr class="node-row {{.State}}" data-node="{{.Name}}"><td>{{if .ID}}{{.ID}}{{else}}—{{end}}</td><td>{{.Name}}{{with .Error}} <span class="bad">({{.}})</span>{{end}}</td><td>{{range $i, $ip := .IPs}}{{if $i}}, {{end}}{{$ip}}{{else}}—{{end}}</td><td class="ready">{{if .Status}}{{if eq .State "stale"}}unknown (last said {{if .Ready}}yes{{else}}no{{end}}){{else if .Ready}}<span class="ok">yes</span>{{else}}<span class="bad">no</span>{{end}}{{else}}—{{end}}</td><td class="age">{{if .AgeSeconds}}{{age .AgeSeconds}}{{if eq .State "stale"}} <span class="bad">(stale)</span>{{end}}{{else}}{{.State}}{{end}}</td><td>{{if .Status}}{{.Used}} / {{.Total}} ({{pct .}}){{else}}—{{end}}</td><td>{{with .Status}}{{.Pods}}{{else}}—{{end}}</td><td>{{with .Status}}{{.ReleaseCandidates}}{{else}}—{{end}}</td><td>{{with .Status}}{{with .REST}}<code>{{.}}</code>{{else}}—{{end}}{{else}}—{{end}}</td></tr>
{{end}}</tbody>
</table>
{{if .Endpoints}}
<h2>Endpoints</h2>
<ul id="endpoints">
{{range .Endpoints}}<li>{{.Method}} {{if .Linkable}}<a href="{{.Path}}">{{.Path}}</a>{{else}}{{.Path}}{{end}}{{with .Description}} — {{.}}{{end}}</li>
{{end}}</ul>
{{end}}
</body>
</html>
`))
