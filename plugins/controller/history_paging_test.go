package controller

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"testing"

	. "github.com/onsi/gomega"
)

// historyAnswer is one answer of GET /controller/event-history.
type historyAnswer struct {
	status int
	header http.Header
	body   string
	seqs   []uint64
}

// getHistory sends GET /controller/event-history<query> to base.
func getHistory(t *testing.T, client *http.Client, base, query string) historyAnswer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+EventHistoryPath+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	a := historyAnswer{status: resp.StatusCode, header: resp.Header, body: string(data)}
	if a.status == http.StatusOK {
		var recs []EventRecord
		if err := json.Unmarshal(data, &recs); err != nil {
			t.Fatalf("body of %s: %v\n%s", query, err, data)
		}
		for _, r := range recs {
			a.seqs = append(a.seqs, r.SeqNum)
		}
	}
	return a
}

// seqRange returns from, from+1, ..., to.
func seqRange(from, to uint64) []uint64 {
	var out []uint64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

func TestEventHistoryPaging(t *testing.T) {
	p, srv, _ := restPlugin(t)
	fillHistory(p, 250) // default limit 100, max 1000
	link := func(before uint64, rest string) string {
		return "<" + EventHistoryPath + "?before=" + strconv.FormatUint(before, 10) + rest + `>; rel="next"`
	}
	cases := []struct {
		name, query string
		seqs        []uint64
		link        string // "" = none
	}{
		{"default: the newest 100", "", seqRange(151, 250), link(151, "")},
		{"next page", "?before=151", seqRange(51, 150), link(51, "")},
		{"last page", "?before=51", seqRange(1, 50), ""},
		{"a larger limit", "?limit=1000", seqRange(1, 250), ""},
		{"last within before", "?last=5&before=100", seqRange(95, 99), link(95, "&last=5")},
		{"first", "?first=3", seqRange(1, 3), ""},
		{"first is capped by limit", "?first=30&limit=10", seqRange(1, 10), ""},
		{"range and limit", "?from=10&to=20&limit=5", seqRange(16, 20), link(16, "&from=10&limit=5&to=20")},
		{"seq-num", "?seq-num=7", []uint64{7}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			a := getHistory(t, srv.Client(), srv.URL(), tc.query)
			g.Expect(a.status).To(Equal(http.StatusOK), a.body)
			g.Expect(a.seqs).To(Equal(tc.seqs))
			g.Expect(a.header.Get("Link")).To(Equal(tc.link))
		})
	}
}

// Values out of range answer 400 naming the parameter; none overflows.
func TestEventHistoryRejectsOutOfRangeValues(t *testing.T) {
	_, srv, _ := restPlugin(t)
	cases := []struct{ query, want string }{
		{"?since=9223372036854775807", `query since=\"9223372036854775807\": want Unix seconds in 0..253402300799`},
		{"?until=-1", `query until=\"-1\": want Unix seconds`},
		{"?seq-num=18446744073709551616", `query seq-num=\"18446744073709551616\": want a sequence number`},
		{"?before=x", `query before=\"x\"`},
		{"?limit=0", `query limit=\"0\": want a count in 1..1000`},
		{"?limit=1001", `query limit=\"1001\": want a count in 1..1000`},
		{"?last=9999999999", `query last=\"9999999999\": want a count in 0..2147483647`},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			g := NewWithT(t)
			status, body := srv.Get(EventHistoryPath + tc.query)
			g.Expect(status).To(Equal(http.StatusBadRequest))
			g.Expect(body).To(ContainSubstring(tc.want))
		})
	}
}

// Requests beyond eventHistoryMaxConcurrentReads get 503 at once.
func TestEventHistoryBeyondTheConcurrencyLimit(t *testing.T) {
	g := NewWithT(t)
	p, srv, _ := restPlugin(t)
	for range cap(p.historyReads) {
		p.historyReads <- struct{}{} // requests being answered
	}
	a := getHistory(t, srv.Client(), srv.URL(), "")
	g.Expect(a.status).To(Equal(http.StatusServiceUnavailable))
	g.Expect(a.header.Get("Retry-After")).To(Equal("1"))
	g.Expect(a.body).To(ContainSubstring(`"error": "too many concurrent event-history requests: at most 4 at a time`))
	<-p.historyReads
	g.Expect(getHistory(t, srv.Client(), srv.URL(), "").status).To(Equal(http.StatusOK))
}
