package htmlq

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"golang.org/x/net/html"
)

const page = `<html><body><div id="a" class="x y"> one <b>two</b> </div><p class="xy">three</p><p data-k="v">four</p></body></html>`

func TestQueries(t *testing.T) {
	g := NewWithT(t)
	doc, err := html.Parse(strings.NewReader(page))
	g.Expect(err).NotTo(HaveOccurred())
	div := One(t, doc, ByAttr("id", "a"))
	g.Expect(Text(div)).To(Equal("one two"), "joined, trimmed")
	g.Expect(Attr(div, "class")).To(Equal("x y"))
	g.Expect(Attr(div, "nope")).To(BeEmpty())
	g.Expect(Find(doc, ByClass("x"))).To(Equal([]*html.Node{div}), "a class is a whole word: xy is not x")
	g.Expect(Find(doc, ByTag("p"))).To(HaveLen(2))
	g.Expect(Text(One(t, doc, ByAttr("data-k", "v")))).To(Equal("four"))
	g.Expect(Find(doc, ByTag("table"))).To(BeEmpty())
}
