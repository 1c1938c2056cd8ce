// Package htmlq queries a parsed HTML document in tests of the pages the
// REST servers render (the agent's status page, contiv-ksr's cluster
// page, their browser tests): find nodes by a predicate, read attributes
// and text. It holds no state.
package htmlq

import (
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// Find returns n and its descendants for which pred is true, in document
// order.
func Find(n *html.Node, pred func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if pred(n) {
			out = append(out, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return out
}

// One is the only node Find returns; the test fails when there is none
// or more than one.
func One(t testing.TB, n *html.Node, pred func(*html.Node) bool) *html.Node {
	t.Helper()
	ns := Find(n, pred)
	if len(ns) != 1 {
		t.Fatalf("want one element, found %d", len(ns))
	}
	return ns[0]
}

// Attr is the value of n's attribute key ("" when it has none).
func Attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// ByAttr matches elements whose attribute key is val.
func ByAttr(key, val string) func(*html.Node) bool {
	return func(n *html.Node) bool { return n.Type == html.ElementNode && Attr(n, key) == val }
}

// ByClass matches elements that have class c.
func ByClass(c string) func(*html.Node) bool {
	return func(n *html.Node) bool {
		return n.Type == html.ElementNode && strings.Contains(" "+Attr(n, "class")+" ", " "+c+" ")
	}
}

// ByTag matches elements named name.
func ByTag(name string) func(*html.Node) bool {
	return func(n *html.Node) bool { return n.Type == html.ElementNode && n.Data == name }
}

// Text is the text of n and its descendants, joined, without leading and
// trailing white space.
func Text(n *html.Node) string {
	var b strings.Builder
	for _, t := range Find(n, func(n *html.Node) bool { return n.Type == html.TextNode }) {
		b.WriteString(t.Data)
	}
	return strings.TrimSpace(b.String())
}
