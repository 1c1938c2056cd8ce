package agentstatus_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/ksr/model/agentstatus"
)

func TestKey(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	g.Expect(agentstatus.Key("node-1")).To(Equal("/vnf-agent/contiv-agent/status/node-1"))
	g.Expect(agentstatus.Prefix).To(Equal("/vnf-agent/contiv-agent/status/"))
}

func TestParseKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, key, want, wantErr string
	}{
		{name: "node", key: "/vnf-agent/contiv-agent/status/node-1", want: "node-1"},
		{name: "dotted", key: "/vnf-agent/contiv-agent/status/w1.example.com", want: "w1.example.com"},
		{name: "empty name", key: "/vnf-agent/contiv-agent/status/", wantErr: `invalid agent status key "/vnf-agent/contiv-agent/status/": empty node name`},
		{name: "slash", key: "/vnf-agent/contiv-agent/status/a/b", wantErr: `"/vnf-agent/contiv-agent/status/a/b": node name contains "/"`},
		{name: "other prefix", key: "/vnf-agent/contiv-nodesync/presence/a", wantErr: `invalid agent status key "/vnf-agent/contiv-nodesync/presence/a": want prefix`},
		{name: "relative", key: "node-1", wantErr: `want prefix "/vnf-agent/contiv-agent/status/"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			node, err := agentstatus.ParseKey(tc.key)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(agentstatus.ErrInvalidKey))
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				g.Expect(node).To(BeEmpty())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(node).To(Equal(tc.want))
			g.Expect(agentstatus.Key(node)).To(Equal(tc.key))
		})
	}
}

var updated = time.Date(2026, 11, 29, 10, 0, 0, 123, time.UTC)

func sample() *agentstatus.Status {
	return &agentstatus.Status{
		Version: 1, Node: "node-1", NodeID: 3, REST: "http://10.0.0.2:9999", Ready: true,
		Pools: []agentstatus.Pool{
			{Name: "pod", Family: 4, Prefix: "10.1.3.0/24", Used: 5, Total: 253},
			{Name: "pod-v6", Family: 6, Prefix: "fd00:1:3::/112", Used: 5, Total: 65533},
		},
		Pods: 5, ReleaseCandidates: 1, Updated: updated, PeriodSeconds: 30,
	}
}

const sampleJSON = `{"version":1,"node":"node-1","nodeId":3,"rest":"http://10.0.0.2:9999","ready":true,` +
	`"pools":[{"name":"pod","family":4,"prefix":"10.1.3.0/24","used":5,"total":253},` +
	`{"name":"pod-v6","family":6,"prefix":"fd00:1:3::/112","used":5,"total":65533}],` +
	`"pods":5,"releaseCandidates":1,"updated":"2026-11-29T10:00:00.000000123Z","periodSeconds":30}`

func TestEncode(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	b, err := sample().Encode()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).To(Equal(sampleJSON))

	// Updated is written in UTC, nil pools as [] and an unknown REST URL left out.
	s := sample()
	s.Updated = updated.In(time.FixedZone("CET", 3600))
	s.Pools = nil
	s.REST = ""
	b, err = s.Encode()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).To(ContainSubstring(`"updated":"2026-11-29T10:00:00.000000123Z"`))
	g.Expect(string(b)).To(ContainSubstring(`"pools":[]`))
	g.Expect(string(b)).NotTo(ContainSubstring(`"rest"`))
	g.Expect(s.Pools).To(BeNil(), "Encode does not change its receiver")

	// Encode refuses what Decode would refuse.
	s = sample()
	s.NodeID = 0
	_, err = s.Encode()
	g.Expect(err).To(MatchError(agentstatus.ErrInvalid))
	g.Expect(err).To(MatchError(ContainSubstring("nodeId")))
}

func TestDecode(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	s, err := agentstatus.Decode([]byte(sampleJSON))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s).To(Equal(sample()))

	// An offset time is returned in UTC; absent pools and rest are empty.
	s, err = agentstatus.Decode([]byte(`{"version":1,"node":"n","nodeId":1,"ready":false,"pods":0,` +
		`"releaseCandidates":0,"updated":"2026-11-29T11:00:00+01:00","periodSeconds":0}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Updated).To(Equal(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)))
	g.Expect(s.Pools).To(BeEmpty())
	g.Expect(s.Pools).NotTo(BeNil())
	g.Expect(s.REST).To(BeEmpty())
}

func TestDecodeRefuses(t *testing.T) {
	t.Parallel()
	// with returns sampleJSON with one field's JSON replaced (or added).
	with := func(field, value string) string {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(sampleJSON), &m); err != nil {
			panic(err)
		}
		m[field] = json.RawMessage(value)
		b, err := json.Marshal(m)
		if err != nil {
			panic(err)
		}
		return string(b)
	}
	pool := func(p string) string { return with("pools", `[`+p+`]`) }
	tests := []struct {
		name, data, wantErr string
	}{
		{name: "empty", data: ``, wantErr: "not JSON at byte 0: unexpected end of JSON input"},
		{name: "truncated", data: `{"version":`, wantErr: "not JSON at byte 11: unexpected end"},
		{name: "garbage", data: `hello`, wantErr: "not JSON at byte"},
		{name: "null", data: `null`, wantErr: "want a JSON object"},
		{name: "array", data: `[]`, wantErr: `JSON array is not a valid`},
		{name: "trailing data", data: sampleJSON + `{}`, wantErr: "not JSON at byte 335: invalid character '{' after top-level value"},
		{name: "unknown field", data: with("colour", `"red"`), wantErr: `unknown field "colour"`},
		{name: "field in other case", data: with("NodeID", `3`), wantErr: `unknown field "NodeID"`},
		{name: "unknown pool field", data: pool(`{"name":"p","family":4,"prefix":"10.0.0.0/24","used":0,"total":1,"x":1}`), wantErr: `unknown field "x" in pools[0]`},
		{name: "null pool", data: pool(`null`), wantErr: `pools[0] is null`},
		{name: "pools not an array", data: with("pools", `{}`), wantErr: `JSON object is not a valid`},
		{name: "string node ID", data: with("nodeId", `"3"`), wantErr: `field "nodeId": JSON string is not a valid uint32`},
		{name: "negative node ID", data: with("nodeId", `-3`), wantErr: `field "nodeId": JSON number -3 is not a valid uint32`},
		{name: "node ID too big", data: with("nodeId", `4294967296`), wantErr: `field "nodeId": JSON number 4294967296`},
		{name: "ready as string", data: with("ready", `"yes"`), wantErr: `field "ready": JSON string is not a valid bool`},
		{name: "used as float", data: pool(`{"name":"p","family":4,"prefix":"10.0.0.0/24","used":1.5,"total":2}`), wantErr: `field "pools.used": JSON number 1.5`},
		{name: "bad time", data: with("updated", `"yesterday"`), wantErr: `yesterday`},
		{name: "version 2", data: with("version", `2`), wantErr: `version 2: this reader knows version 1 only`},
		{name: "version missing", data: strings.Replace(sampleJSON, `"version":1,`, ``, 1), wantErr: `version 0`},
		{name: "node empty", data: with("node", `""`), wantErr: `node "": empty`},
		{name: "node slash", data: with("node", `"a/b"`), wantErr: `node "a/b": contains "/"`},
		{name: "node ID 0", data: with("nodeId", `0`), wantErr: `nodeId 0x0: node IDs start at 1`},
		{name: "REST not http", data: with("rest", `"ftp://h:1"`), wantErr: `rest "ftp://h:1": want an http or https URL`},
		{name: "REST no host", data: with("rest", `"http://"`), wantErr: `rest "http://": no host`},
		{name: "REST relative", data: with("rest", `"10.0.0.1:9999"`), wantErr: `rest "10.0.0.1:9999"`},
		{name: "pods negative", data: with("pods", `-1`), wantErr: `pods -1: negative`},
		{name: "candidates negative", data: with("releaseCandidates", `-1`), wantErr: `releaseCandidates -1: negative`},
		{name: "period negative", data: with("periodSeconds", `-30`), wantErr: `periodSeconds -30: negative`},
		{name: "updated missing", data: strings.Replace(sampleJSON, `"updated":"2026-11-29T10:00:00.000000123Z",`, ``, 1), wantErr: `updated "0001-01-01T00:00:00Z": not set`},
		{name: "pool name empty", data: pool(`{"name":"","family":4,"prefix":"10.0.0.0/24","used":0,"total":1}`), wantErr: `pools[0].name "": empty`},
		{name: "pool family 5", data: pool(`{"name":"p","family":5,"prefix":"10.0.0.0/24","used":0,"total":1}`), wantErr: `pools[0].family 5: want 4 or 6`},
		{name: "pool prefix bad", data: pool(`{"name":"p","family":4,"prefix":"10.0.0.0","used":0,"total":1}`), wantErr: `pools[0].prefix "10.0.0.0": not an address prefix`},
		{name: "pool prefix family", data: pool(`{"name":"p","family":4,"prefix":"fd00::/64","used":0,"total":1}`), wantErr: `pools[0].prefix "fd00::/64": not of family 4`},
		{name: "pool over-full", data: pool(`{"name":"p","family":4,"prefix":"10.0.0.0/24","used":3,"total":2}`), wantErr: `pools[0].used 0x3: more than total 2`},
		{name: "pool duplicate", data: with("pools", `[{"name":"p","family":4,"prefix":"10.0.0.0/24","used":0,"total":1},{"name":"p","family":4,"prefix":"10.0.1.0/24","used":0,"total":1}]`), wantErr: `pools[1].name "p": duplicate pool name`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			s, err := agentstatus.Decode([]byte(tc.data))
			g.Expect(err).To(MatchError(agentstatus.ErrInvalid))
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
			g.Expect(s).To(BeNil())
		})
	}
}

func TestStale(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		period int
		age    time.Duration
		want   bool
	}{
		{name: "fresh", period: 10, age: 0},
		{name: "one period", period: 10, age: 10 * time.Second},
		{name: "three periods exactly", period: 10, age: 30 * time.Second},
		{name: "past three periods", period: 10, age: 30*time.Second + time.Nanosecond, want: true},
		{name: "default period fresh", period: 0, age: 89 * time.Second},
		{name: "default period stale", period: 0, age: 91 * time.Second, want: true},
		{name: "from the future", period: 10, age: -time.Hour},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			s := sample()
			s.PeriodSeconds = tc.period
			g.Expect(s.Stale(updated.Add(tc.age))).To(Equal(tc.want))
			g.Expect(s.Age(updated.Add(tc.age))).To(Equal(tc.age))
		})
	}
}

func TestFill(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	used, total := sample().Fill()
	g.Expect(used).To(Equal(uint64(10)))
	g.Expect(total).To(Equal(uint64(253 + 65533)))
	used, total = (&agentstatus.Status{}).Fill()
	g.Expect(used).To(BeZero())
	g.Expect(total).To(BeZero())
}

// FuzzDecode: Decode never panics; a record it accepts re-encodes, and the
// encoding decodes to an equal record and encodes to the same bytes.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(sampleJSON))
	f.Add([]byte(`{"version":1,"node":"n","nodeId":1,"updated":"2026-01-01T00:00:00+05:00"}`))
	f.Add([]byte(`{"version":1,"node":"n","nodeId":1,"pools":null,"updated":"2026-01-01T00:00:00Z","rest":"https://[::1]:9"}`))
	f.Add([]byte(`{"Version":1}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := agentstatus.Decode(data)
		if err != nil {
			if s != nil {
				t.Fatalf("Decode(%q) returned a record with error %v", data, err)
			}
			return
		}
		b, err := s.Encode()
		if err != nil {
			t.Fatalf("Decode(%q) accepted a record Encode refuses: %v", data, err)
		}
		s2, err := agentstatus.Decode(b)
		if err != nil {
			t.Fatalf("Decode(Encode(Decode(%q))) = %v", data, err)
		}
		if !s2.Updated.Equal(s.Updated) {
			t.Fatalf("updated %v became %v", s.Updated, s2.Updated)
		}
		s2.Updated = s.Updated
		g := NewWithT(t)
		g.Expect(s2).To(Equal(s))
		b2, err := s2.Encode()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(b2)).To(Equal(string(b)))
	})
}
