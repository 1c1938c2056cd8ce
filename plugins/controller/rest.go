package controller

import (
	"encoding/json"
	"errors"
	"fmt"
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
	rest.RegisterDescribed(p.HTTP, EventHistoryPath,
		"processed events with handler outcomes; query: seq-num, since/until (Unix s), from/to (seq), first, last",
		p.historyHandler, http.MethodGet)
	rest.RegisterDescribed(p.HTTP, ResyncPath, "resync the Kubernetes state from etcd",
		p.resyncHandler, http.MethodPost)
	rest.RegisterDescribed(p.HTTP, ConfigPath, "the desired configuration committed by the event handlers",
		p.configHandler, http.MethodGet)
}

func (p *Plugin) historyHandler(f *rest.Formatter) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q, err := parseHistoryQuery(r.URL.Query())
		if err != nil {
			f.Error(w, http.StatusBadRequest, err)
			return
		}
		records := p.loop.history.query(q)
		if q.seqNum != nil && len(records) == 0 {
			f.Error(w, http.StatusNotFound, errors.New("event with such sequence number is not recorded"))
			return
		}
		f.JSON(w, http.StatusOK, records)
	}
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

// parseHistoryQuery reads the query parameters; a bad value names itself.
func parseHistoryQuery(v url.Values) (historyQuery, error) {
	var q historyQuery
	var err error
	parseSeq := func(name string) *uint64 {
		s := v.Get(name)
		if s == "" || err != nil {
			return nil
		}
		n, perr := strconv.ParseUint(s, 10, 64)
		if perr != nil {
			err = fmt.Errorf("query %s=%q: want a sequence number", name, s)
			return nil
		}
		return &n
	}
	parseTime := func(name string) *time.Time {
		s := v.Get(name)
		if s == "" || err != nil {
			return nil
		}
		n, perr := strconv.ParseInt(s, 10, 64)
		if perr != nil {
			err = fmt.Errorf("query %s=%q: want Unix seconds", name, s)
			return nil
		}
		t := time.Unix(n, 0)
		return &t
	}
	parseCount := func(name string) *int {
		s := v.Get(name)
		if s == "" || err != nil {
			return nil
		}
		n, perr := strconv.Atoi(s)
		if perr != nil || n < 0 {
			err = fmt.Errorf("query %s=%q: want a count >= 0", name, s)
			return nil
		}
		return &n
	}
	q.seqNum = parseSeq("seq-num")
	q.since, q.until = parseTime("since"), parseTime("until")
	q.from, q.to = parseSeq("from"), parseSeq("to")
	q.first, q.last = parseCount("first"), parseCount("last")
	return q, err
}
