package agentstatus

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"reflect"
	"strings"
	"time"
)

// Prefix is the full etcd prefix of the agents' status records (outside
// the KSR prefix, like vppnode.PresencePrefix).
const Prefix = "/vnf-agent/contiv-agent/status/"

// Version is the record version this package writes and reads.
const Version = 1

// DefaultPeriod is the publish period Stale assumes when a record's
// PeriodSeconds is 0.
const DefaultPeriod = 30 * time.Second

// StalePeriods is how many publish periods may pass after Updated before
// a record is stale.
const StalePeriods = 3

// ErrInvalidKey is wrapped by every ParseKey error.
var ErrInvalidKey = errors.New("invalid agent status key")

// ErrInvalid is wrapped by every Decode and Validate error.
var ErrInvalid = errors.New("invalid agent status")

// Key returns the status key of the node named node: Prefix + node.
func Key(node string) string { return Prefix + node }

// ParseKey returns the node name of a status key. The key must be Prefix
// followed by a non-empty name without "/". Errors wrap ErrInvalidKey and
// quote key.
func ParseKey(key string) (node string, err error) {
	name, ok := strings.CutPrefix(key, Prefix)
	switch {
	case !ok:
		return "", fmt.Errorf("%w %q: want prefix %q", ErrInvalidKey, key, Prefix)
	case name == "":
		return "", fmt.Errorf("%w %q: empty node name", ErrInvalidKey, key)
	case strings.Contains(name, "/"):
		return "", fmt.Errorf("%w %q: node name contains \"/\"", ErrInvalidKey, key)
	}
	return name, nil
}

// Status is one agent's status record.
type Status struct {
	Version           int       `json:"version"` // 1
	Node              string    `json:"node"`
	NodeID            uint32    `json:"nodeId"`
	REST              string    `json:"rest,omitempty"` // the agent's REST base URL, e.g. http://10.0.0.2:9999; "" unknown
	Ready             bool      `json:"ready"`
	Pools             []Pool    `json:"pools"`
	Pods              int       `json:"pods"` // pod allocations held
	ReleaseCandidates int       `json:"releaseCandidates"`
	Updated           time.Time `json:"updated"`
	PeriodSeconds     int       `json:"periodSeconds"` // the publish period; readers judge staleness from it
}

// Pool is the fill of one of the agent's IPAM pools.
type Pool struct {
	Name   string `json:"name"`   // as the ipam REST pools call names it
	Family int    `json:"family"` // 4 or 6
	Prefix string `json:"prefix"`
	Used   uint64 `json:"used"`
	Total  uint64 `json:"total"` // allocatable addresses
}

// The JSON names of the fields, for the strict key check of Decode.
var (
	statusFields = fieldSet(Status{})
	poolFields   = fieldSet(Pool{})
)

// Encode validates s and returns its JSON form. Updated is written in UTC;
// nil Pools are written as [].
func (s *Status) Encode() ([]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	c := *s
	c.Updated = c.Updated.UTC()
	if c.Pools == nil {
		c.Pools = []Pool{}
	}
	b, err := json.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("%w: encode: %w", ErrInvalid, err)
	}
	return b, nil
}

// Decode parses and validates one record. It is strict: every field name
// must be spelt exactly as Encode writes it, unknown fields, wrong JSON
// types, null where an object is due and data after the object are refused,
// and so is every value Validate refuses. Errors wrap ErrInvalid and name
// the field and the value. Updated is returned in UTC; Pools is never nil.
func Decode(b []byte) (*Status, error) {
	if err := checkKeys(b); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var s Status
	if err := dec.Decode(&s); err != nil {
		return nil, decodeError(err)
	}
	s.Updated = s.Updated.UTC()
	if s.Pools == nil {
		s.Pools = []Pool{}
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// Validate checks the rules of a record: version 1, a node name usable in
// Key, a node ID from 1, an absolute http or https REST URL or "", pools
// with a name (unique), family 4 or 6, a prefix of that family and used <=
// total, counts and the period not negative, Updated set. Errors wrap
// ErrInvalid and name the field and the value.
func (s *Status) Validate() error {
	bad := func(field string, v any, why string) error {
		return fmt.Errorf("%w: %s %#v: %s", ErrInvalid, field, v, why)
	}
	switch {
	case s.Version != Version:
		return bad("version", s.Version, fmt.Sprintf("this reader knows version %d only", Version))
	case s.Node == "":
		return bad("node", s.Node, "empty")
	case strings.Contains(s.Node, "/"):
		return bad("node", s.Node, `contains "/"`)
	case s.NodeID == 0:
		return bad("nodeId", s.NodeID, "node IDs start at 1")
	case s.Pods < 0:
		return bad("pods", s.Pods, "negative")
	case s.ReleaseCandidates < 0:
		return bad("releaseCandidates", s.ReleaseCandidates, "negative")
	case s.PeriodSeconds < 0:
		return bad("periodSeconds", s.PeriodSeconds, "negative")
	case s.Updated.IsZero():
		return bad("updated", s.Updated.Format(time.RFC3339), "not set")
	case s.Updated.Year() < 1 || s.Updated.Year() > 9999:
		return bad("updated", s.Updated.String(), "year outside 1..9999")
	}
	if s.REST != "" {
		u, err := url.Parse(s.REST)
		switch {
		case err != nil:
			return bad("rest", s.REST, "not a URL")
		case u.Scheme != "http" && u.Scheme != "https":
			return bad("rest", s.REST, "want an http or https URL")
		case u.Host == "":
			return bad("rest", s.REST, "no host")
		}
	}
	seen := make(map[string]bool, len(s.Pools))
	for i, p := range s.Pools {
		f := func(name string) string { return fmt.Sprintf("pools[%d].%s", i, name) }
		switch {
		case p.Name == "":
			return bad(f("name"), p.Name, "empty")
		case seen[p.Name]:
			return bad(f("name"), p.Name, "duplicate pool name")
		case p.Family != 4 && p.Family != 6:
			return bad(f("family"), p.Family, "want 4 or 6")
		case p.Used > p.Total:
			return bad(f("used"), p.Used, fmt.Sprintf("more than total %d", p.Total))
		}
		seen[p.Name] = true
		pfx, err := netip.ParsePrefix(p.Prefix)
		switch {
		case err != nil:
			return bad(f("prefix"), p.Prefix, "not an address prefix")
		case pfx.Addr().Is4() != (p.Family == 4):
			return bad(f("prefix"), p.Prefix, fmt.Sprintf("not of family %d", p.Family))
		}
	}
	return nil
}

// Period is the record's publish period: PeriodSeconds, or DefaultPeriod
// when it is 0.
func (s *Status) Period() time.Duration {
	if s.PeriodSeconds <= 0 {
		return DefaultPeriod
	}
	return time.Duration(s.PeriodSeconds) * time.Second
}

// Age is how long ago the record was updated, as of now.
func (s *Status) Age(now time.Time) time.Duration { return now.Sub(s.Updated) }

// Stale reports whether Updated is older than StalePeriods periods as of
// now (3 x PeriodSeconds, or 3 x 30 s when PeriodSeconds is 0).
func (s *Status) Stale(now time.Time) bool {
	return s.Age(now) > StalePeriods*s.Period()
}

// Fill sums Used and Total over the record's pools.
func (s *Status) Fill() (used, total uint64) {
	for _, p := range s.Pools {
		used += p.Used
		total += p.Total
	}
	return used, total
}

// checkKeys refuses, before the struct decode (which matches names without
// regard to case), data that is not one JSON value and any field name of the record or of a pool that is not
// spelt exactly as Encode writes it.
func checkKeys(b []byte) error {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return decodeError(err)
	}
	if top == nil {
		return fmt.Errorf("%w: want a JSON object, have %s", ErrInvalid, excerpt(b))
	}
	for k := range top {
		if !statusFields[k] {
			return fmt.Errorf("%w: unknown field %q", ErrInvalid, k)
		}
	}
	raw, ok := top["pools"]
	if !ok {
		return nil
	}
	var pools []json.RawMessage
	if err := json.Unmarshal(raw, &pools); err != nil {
		return decodeError(err)
	}
	for i, pr := range pools {
		var p map[string]json.RawMessage
		if err := json.Unmarshal(pr, &p); err != nil {
			return fmt.Errorf("%w: pools[%d]: %w", ErrInvalid, i, decodeError(err))
		}
		if p == nil {
			return fmt.Errorf("%w: pools[%d] is null", ErrInvalid, i)
		}
		for k := range p {
			if !poolFields[k] {
				return fmt.Errorf("%w: unknown field %q in pools[%d]", ErrInvalid, k, i)
			}
		}
	}
	return nil
}

// decodeError words an encoding/json error with the field and the value.
func decodeError(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "(record)"
		}
		return fmt.Errorf("%w: field %q: JSON %s is not a valid %s", ErrInvalid, field, te.Value, te.Type)
	case errors.As(err, &se):
		return fmt.Errorf("%w: not JSON at byte %d: %w", ErrInvalid, se.Offset, err)
	}
	return fmt.Errorf("%w: %w", ErrInvalid, err)
}

// excerpt quotes at most 64 bytes of b.
func excerpt(b []byte) string {
	if len(b) > 64 {
		return fmt.Sprintf("%q...", b[:64])
	}
	return fmt.Sprintf("%q", b)
}

// fieldSet returns the JSON names of v's fields.
func fieldSet(v any) map[string]bool {
	t := reflect.TypeOf(v)
	set := make(map[string]bool, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		set[name] = true
	}
	return set
}
