package rest_test

import (
	"errors"
	"html/template"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/rest"
)

func TestFormatter(t *testing.T) {
	f := rest.NewFormatter(nil)
	tmpl := template.Must(template.New("t").Parse(`<p>{{.}}</p>`))
	broken := template.Must(template.New("b").Parse(`{{.Missing.Field}}`))
	cases := []struct {
		name        string
		write       func(w http.ResponseWriter)
		status      int
		contentType string
		body        string
	}{
		{"JSON is indented", func(w http.ResponseWriter) { f.JSON(w, 201, map[string]int{"a": 1}) },
			201, "application/json", "{\n  \"a\": 1\n}\n"},
		{"JSON that cannot be encoded", func(w http.ResponseWriter) { f.JSON(w, 200, math.Inf(1)) },
			500, "application/json", `"error":"encoding response`},
		{"Error", func(w http.ResponseWriter) { f.Error(w, 400, errors.New("bad level \"x\"")) },
			400, "application/json", "{\n  \"error\": \"bad level \\\"x\\\"\"\n}\n"},
		{"Error without error", func(w http.ResponseWriter) { f.Error(w, 404, nil) },
			404, "application/json", `"error": "Not Found"`},
		{"Text", func(w http.ResponseWriter) { f.Text(w, 200, "plain") }, 200, "text/plain", "plain"},
		{"HTML escapes", func(w http.ResponseWriter) { f.HTML(w, 200, tmpl, "<b>") },
			200, "text/html", "<p>&lt;b&gt;</p>"},
		{"HTML template failure", func(w http.ResponseWriter) { f.HTML(w, 200, broken, 1) },
			500, "text/plain", "rendering template"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			rec := httptest.NewRecorder()
			tc.write(rec)
			g.Expect(rec.Code).To(Equal(tc.status))
			g.Expect(rec.Header().Get("Content-Type")).To(HavePrefix(tc.contentType))
			g.Expect(rec.Body.String()).To(ContainSubstring(tc.body))
		})
	}
}

// JSONList writes, item by item, the bytes JSON writes for the slice.
func TestJSONListMatchesJSON(t *testing.T) {
	type item struct {
		Name  string
		Inner map[string][]int `json:",omitempty"`
	}
	f := rest.NewFormatter(nil)
	cases := []struct {
		name  string
		items []item
	}{
		{"empty", []item{}},
		{"one", []item{{Name: "a"}}},
		{"nested and escaped", []item{{Name: "<b>\"x\""}, {Name: "b", Inner: map[string][]int{"k": {1, 2}}}, {Name: "c"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			whole, list := httptest.NewRecorder(), httptest.NewRecorder()
			f.JSON(whole, http.StatusOK, tc.items)
			f.JSONList(list, http.StatusOK, len(tc.items), func(i int) any { return tc.items[i] })
			g.Expect(list.Code).To(Equal(http.StatusOK))
			g.Expect(list.Header().Get("Content-Type")).To(Equal(whole.Header().Get("Content-Type")))
			g.Expect(list.Body.String()).To(Equal(whole.Body.String()))
		})
	}
}

// JSONStream writes the bytes, status and headers JSON writes, for any
// value: empty and nested objects and arrays, strings with escaped quotes
// and backslashes and punctuation in them, nesting deeper than the
// precomputed indents, and a body larger than its write buffer.
func TestJSONStreamMatchesJSON(t *testing.T) {
	type inner struct {
		S     string         `json:"s"`
		Empty []int          `json:"empty"`
		Obj   map[string]int `json:"obj"`
		Nil   *inner         `json:"nil"`
	}
	deep := any("bottom")
	for range 40 {
		deep = []any{deep, map[string]any{"k": 1}}
	}
	big := make([]inner, 3000)
	for i := range big {
		big[i] = inner{S: strings.Repeat(`a"\,:{[`, i%7), Obj: map[string]int{"x": i}}
	}
	f := rest.NewFormatter(nil)
	for name, v := range map[string]any{
		"scalar":      1.5,
		"string":      `a"b\c`,
		"null":        nil,
		"empty array": []int{},
		"empty map":   map[string]int{},
		"punctuation in strings": []string{`"`, `\`, `\\`, `\"`, `"}`, `,`, `:`, `{}`, `[]`, "\u2028<>&",
			"é\x00\t"},
		"struct": inner{S: "x", Empty: []int{}, Obj: map[string]int{"a": 1, "b": 2}},
		"deep":   deep,
		"big":    big,
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			whole, stream := httptest.NewRecorder(), httptest.NewRecorder()
			f.JSON(whole, http.StatusAccepted, v)
			f.JSONStream(stream, http.StatusAccepted, v)
			g.Expect(stream.Code).To(Equal(http.StatusAccepted))
			g.Expect(stream.Header()).To(Equal(whole.Header()))
			g.Expect(stream.Body.String()).To(Equal(whole.Body.String()))
		})
	}
	t.Run("cannot be encoded", func(t *testing.T) {
		g := NewWithT(t)
		whole, stream := httptest.NewRecorder(), httptest.NewRecorder()
		f.JSON(whole, http.StatusOK, math.Inf(1))
		f.JSONStream(stream, http.StatusOK, math.Inf(1))
		g.Expect(stream.Code).To(Equal(http.StatusInternalServerError))
		g.Expect(stream.Header()).To(Equal(whole.Header()))
		g.Expect(stream.Body.String()).To(Equal(whole.Body.String()))
	})
}
