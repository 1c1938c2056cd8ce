package rest

import (
	"embed"
	"html/template"
	"net/http"
	"strconv"
	"strings"
)

//go:embed index.html
var indexFiles embed.FS

// indexPath is the ServeMux pattern path of the index: "/" and nothing else.
const indexPath = "/{$}"

// indexData is the data of index.html.
type indexData struct {
	Title     string
	Endpoints []indexRow
}

type indexRow struct {
	Endpoint
	Link bool // a GET without {variables}, so a browser can follow it
}

// indexBody is the JSON shape of the index.
type indexBody struct {
	Endpoints []Endpoint `json:"endpoints"`
}

// indexHandler lists every registered endpoint: JSON unless the client
// prefers HTML; the HTML is the page a plugin provided (page), or else
// the built-in endpoint table.
func indexHandler(r *router, f *Formatter, tmpl *template.Template, page *indexPageHolder) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		eps := r.list()
		if !prefersHTML(req.Header.Get("Accept")) {
			f.JSON(w, http.StatusOK, indexBody{Endpoints: eps})
			return
		}
		if fn := page.get(); fn != nil {
			fn(w, req, eps)
			return
		}
		data := indexData{Title: "contiv-agent REST API", Endpoints: make([]indexRow, 0, len(eps))}
		for _, e := range eps {
			data.Endpoints = append(data.Endpoints, indexRow{Endpoint: e, Link: e.Linkable()})
		}
		f.HTML(w, http.StatusOK, tmpl, data)
	}
}

func parseIndexTemplate() (*template.Template, error) {
	return template.ParseFS(indexFiles, "index.html")
}

// prefersHTML reports whether an Accept header ranks text/html above
// application/json. An empty header prefers JSON.
func prefersHTML(accept string) bool {
	return acceptQuality(accept, "text/html") > acceptQuality(accept, "application/json")
}

// acceptQuality returns the q value that an Accept header gives mediaType,
// taken from the most specific matching range (type/subtype, type/*, */*).
// An empty header accepts everything with q=1.
func acceptQuality(accept, mediaType string) float64 {
	if strings.TrimSpace(accept) == "" {
		return 1
	}
	mainType, _, _ := strings.Cut(mediaType, "/")
	best, bestRank := 0.0, -1
	for part := range strings.SplitSeq(accept, ",") {
		fields := strings.Split(part, ";")
		rank := -1
		switch strings.ToLower(strings.TrimSpace(fields[0])) {
		case mediaType:
			rank = 2
		case mainType + "/*":
			rank = 1
		case "*/*":
			rank = 0
		}
		if rank > bestRank {
			best, bestRank = qValue(fields[1:]), rank
		}
	}
	return best
}

// qValue finds q=<float> among media-range parameters; 1 when absent or
// malformed.
func qValue(params []string) float64 {
	for _, p := range params {
		k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "q") {
			continue
		}
		if q, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && q >= 0 && q <= 1 {
			return q
		}
	}
	return 1
}
