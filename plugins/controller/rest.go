package controller

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"time"

	"github.com/contiv-ipam/agent/infra/rest"
)

// REST paths of the controller.
const (
	EventHistoryPath = "/controller/event-history"
	ResyncPath       = "/controller/resync"
	ConfigPath       = "/controller/config"
)

// ResyncDispatched is the reply of POST /controller/resync.
const ResyncDispatched = "Resync request was successfully dispatched."

func (p *Plugin) registerHandlers() {
	p.historyReads = make(chan struct{}, p.cfg.EventHistoryMaxConcurrentReads)
	rest.RegisterDescribed(p.HTTP, EventHistoryPath,
		"processed events, oldest first, at most limit (default "+strconv.Itoa(p.cfg.EventHistoryDefaultLimit)+
			") of the newest; query: seq-num, since/until (Unix s), from/to (seq), before (seq), first, last, limit",
		p.historyHandler, http.MethodGet)
	rest.RegisterDescribed(p.HTTP, ResyncPath, "resync the Kubernetes state from etcd (503 when the event loop has stopped)",
		p.resyncHandler, http.MethodPost)
	rest.RegisterDescribed(p.HTTP, ConfigPath, "the desired configuration committed by the event handlers",
		p.configHandler, http.MethodGet)
}

// historyHandler answers one page of the history, encoded record by
// record. At most eventHistoryMaxConcurrentReads requests are answered at
// a time; the others get 503 with Retry-After at once, so that memory
// stays bounded whatever the clients do.
func (p *Plugin) historyHandler(f *rest.Formatter) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case p.historyReads <- struct{}{}:
			defer func() { <-p.historyReads }()
		default:
			w.Header().Set("Retry-After", "1")
			f.Error(w, http.StatusServiceUnavailable, fmt.Errorf("%w: at most %d at a time (eventHistoryMaxConcurrentReads); retry later",
				errTooManyHistoryReads, cap(p.historyReads)))
			return
		}
		q, err := parseHistoryQuery(r.URL.Query(), p.cfg)
		if err != nil {
			f.Error(w, http.StatusBadRequest, err)
			return
		}
		pg := p.loop.history.query(q)
		if q.seqNum != nil && len(pg.records) == 0 {
			f.Error(w, http.StatusNotFound, errors.New("event with such sequence number is not recorded"))
			return
		}
		if pg.olderLeft {
			w.Header().Set("Link", nextPageLink(r.URL, pg.records[0].SeqNum))
		}
		f.JSONList(w, http.StatusOK, len(pg.records), func(i int) any { return &pg.records[i] })
	}
}

// errTooManyHistoryReads answers the history requests beyond the limit.
var errTooManyHistoryReads = errors.New("too many concurrent event-history requests")

// nextPageLink is the Link header of the page of older records: the same
// query with before set to the oldest record returned.
func nextPageLink(u *url.URL, oldest uint64) string {
	v := u.Query()
	v.Set("before", strconv.FormatUint(oldest, 10))
	next := url.URL{Path: u.Path, RawQuery: v.Encode()}
	return "<" + next.String() + `>; rel="next"`
}

func (p *Plugin) resyncHandler(f *rest.Formatter) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if err := p.RequestResync(); err != nil {
			f.Error(w, http.StatusServiceUnavailable, err)
			return
		}
		f.JSON(w, http.StatusOK, ResyncDispatched)
	}
}

// configHandler serves key -> value, each value as protojson.
func (p *Plugin) configHandler(f *rest.Formatter) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		dump := p.DesiredConfig()
		keys := make([]string, 0, len(dump))
		for k := range dump {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out := make(map[string]json.RawMessage, len(dump))
		for _, k := range keys {
			out[k] = json.RawMessage(encodeValue(dump[k]))
		}
		f.JSON(w, http.StatusOK, out)
	}
}

// maxUnixSeconds is the latest time accepted by since and until: the end
// of year 9999, far from the int64 nanoseconds that time.Time compares.
const maxUnixSeconds = 253402300799

// parseHistoryQuery reads the query parameters; a bad or out-of-range
// value is an error naming the parameter and the accepted range.
func parseHistoryQuery(v url.Values, cfg Config) (historyQuery, error) {
	qp := queryParser{v: v}
	q := historyQuery{
		seqNum: qp.seq("seq-num"),
		since:  qp.unixTime("since"), until: qp.unixTime("until"),
		from: qp.seq("from"), to: qp.seq("to"), before: qp.seq("before"),
		first: qp.count("first", 0, math.MaxInt32), last: qp.count("last", 0, math.MaxInt32),
		limit: cfg.EventHistoryDefaultLimit,
	}
	if n := qp.count("limit", 1, cfg.EventHistoryMaxLimit); n != nil {
		q.limit = *n
	}
	return q, errors.Join(qp.errs...)
}

// queryParser parses query parameters and collects one error per bad one.
type queryParser struct {
	v    url.Values
	errs []error
}

func (qp *queryParser) fail(name, value, want string) {
	qp.errs = append(qp.errs, fmt.Errorf("query %s=%q: %s", name, value, want))
}

// seq parses a sequence number (uint64).
func (qp *queryParser) seq(name string) *uint64 {
	s := qp.v.Get(name)
	if s == "" {
		return nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		qp.fail(name, s, "want a sequence number (0..18446744073709551615)")
		return nil
	}
	return &n
}

// unixTime parses Unix seconds in 0..maxUnixSeconds.
func (qp *queryParser) unixTime(name string) *time.Time {
	s := qp.v.Get(name)
	if s == "" {
		return nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > maxUnixSeconds {
		qp.fail(name, s, fmt.Sprintf("want Unix seconds in 0..%d", maxUnixSeconds))
		return nil
	}
	t := time.Unix(n, 0)
	return &t
}

// count parses a count in minN..maxN.
func (qp *queryParser) count(name string, minN, maxN int) *int {
	s := qp.v.Get(name)
	if s == "" {
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < minN || n > maxN {
		qp.fail(name, s, fmt.Sprintf("want a count in %d..%d", minN, maxN))
		return nil
	}
	return &n
}
