package checkpoint_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/ipam/checkpoint"
)

var t0 = time.Date(2026, 11, 25, 14, 50, 0, 0, time.UTC)

// rich is a Data with every key kind, dual-stack, a reservation and
// metadata, in the order Encode writes it (by first address).
func rich() checkpoint.Data {
	return checkpoint.Data{
		Version: checkpoint.Version,
		Node:    "worker-1",
		TakenAt: t0,
		Allocations: []checkpoint.Entry{
			{Pod: &checkpoint.Pod{Name: "db-0", Namespace: "default"}, IPs: []string{"10.1.1.2"}},
			{
				Network: "k8s-pod-network", ContainerID: "c1", IfName: "eth0",
				Pod:         &checkpoint.Pod{Name: "web-0", Namespace: "default"},
				IPs:         []string{"10.1.1.3", "fd00:10:1:1::3"},
				Pools:       []string{"10.1.1.0/24", "fd00:10:1:1::/64"},
				AllocatedAt: t0.Add(-time.Hour),
				Metadata:    map[string]string{"team": "web", "tier": "front"},
			},
			{
				Owner: "router", Seq: 7, IPs: []string{"10.1.1.4"}, Pools: []string{"10.1.1.0/24"},
				Reservation: &checkpoint.Reservation{ID: "2764c618-985a-4630-b538-08b8f79a4334", Deadline: t0.Add(5 * time.Minute)},
			},
			{Owner: "appliance", Seq: 1, IPs: []string{"fd00:10:1:1::2", "10.1.1.5"}, AllocatedAt: t0.Add(-2 * time.Hour)},
		},
	}
}

func TestRoundTrip(t *testing.T) {
	g := NewWithT(t)
	want := rich()
	in := rich()
	in.Version = "" // Encode sets it
	// Encode sorts by first address: give it the entries reversed.
	for i, j := 0, len(in.Allocations)-1; i < j; i, j = i+1, j-1 {
		in.Allocations[i], in.Allocations[j] = in.Allocations[j], in.Allocations[i]
	}
	b, err := checkpoint.Encode(in)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(in.Allocations[0].Owner).To(Equal("appliance"), "Encode does not reorder its argument")
	g.Expect(string(b)).To(HavePrefix("{\n  \"version\": \"contiv-ipam/2\",\n  \"node\": \"worker-1\",\n"))
	g.Expect(string(b)).To(HaveSuffix("}\n"))
	got, err := checkpoint.Decode(b)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(want))

	again, err := checkpoint.Encode(got)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(again)).To(Equal(string(b)), "deterministic")
}

// The bytes Encode writes, once, so that a change of the format shows.
func TestEncodeForm(t *testing.T) {
	g := NewWithT(t)
	d := checkpoint.Data{Node: "n", TakenAt: time.Date(2026, 1, 2, 4, 4, 5, 0, time.FixedZone("CET", 3600)),
		Allocations: []checkpoint.Entry{
			{Owner: "o", Seq: 1, IPs: []string{"FD00::0:1"}},
			{Pod: &checkpoint.Pod{Name: "p", Namespace: "ns"}, IPs: []string{"10.0.0.9"}, Pools: []string{"10.0.0.0/24"}, Metadata: map[string]string{}},
		}}
	b, err := checkpoint.Encode(d)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).To(Equal(`{
  "version": "contiv-ipam/2",
  "node": "n",
  "takenAt": "2026-01-02T03:04:05Z",
  "allocations": [
    {
      "pod": {
        "name": "p",
        "namespace": "ns"
      },
      "ips": [
        "10.0.0.9"
      ],
      "pools": [
        "10.0.0.0/24"
      ]
    },
    {
      "owner": "o",
      "seq": 1,
      "ips": [
        "fd00::1"
      ]
    }
  ]
}
`))
	g.Expect(d.Allocations[0].IPs[0]).To(Equal("FD00::0:1"), "Encode does not modify its argument")

	b, err = checkpoint.Encode(checkpoint.Data{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).To(ContainSubstring(`"allocations": []`))
	got, err := checkpoint.Decode(b)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Allocations).To(BeEmpty())
	g.Expect(got.Allocations).NotTo(BeNil())
}

func TestEncodeRefusesWhatDecodeRefuses(t *testing.T) {
	g := NewWithT(t)
	d := rich()
	d.Allocations[3].IPs = []string{"10.1.1.3"} // the address of allocations[1]
	_, err := checkpoint.Encode(d)
	g.Expect(err).To(MatchError(ContainSubstring(`allocations[3]: field "ips[0]": "10.1.1.3" is also an address of allocations[1]`)))
	g.Expect(errors.Is(err, checkpoint.ErrInvalid)).To(BeTrue())
}

func TestV1FixtureMigrates(t *testing.T) {
	g := NewWithT(t)
	b, err := os.ReadFile("testdata/v1.json")
	g.Expect(err).NotTo(HaveOccurred())
	got, err := checkpoint.Decode(b)
	g.Expect(err).NotTo(HaveOccurred())
	web := &checkpoint.Pod{Name: "web-0", Namespace: "default"}
	g.Expect(got).To(Equal(checkpoint.Data{
		Version: checkpoint.Version,
		Node:    "worker-1",
		TakenAt: time.Date(2025, 6, 1, 8, 30, 0, 0, time.UTC),
		Allocations: []checkpoint.Entry{
			{Network: "k8s-pod-network", ContainerID: "5d0b3f6e9a21", IfName: "eth0", Pod: web, IPs: []string{"10.1.1.2"},
				AllocatedAt: time.Date(2025, 6, 1, 6, 0, 0, 0, time.UTC), Metadata: map[string]string{"team": "web"}},
			{Pod: &checkpoint.Pod{Name: "dns-1", Namespace: "kube-system"}, IPs: []string{"10.1.1.3"}},
			{Network: "k8s-pod-network", ContainerID: "77aa01", IfName: "net1", Pod: web, IPs: []string{"10.1.1.10"},
				AllocatedAt: time.Date(2025, 6, 1, 7, 59, 59, 500_000_000, time.UTC)},
		},
	}))
	// The migrated document is written as the current version and reads back the same.
	b, err = checkpoint.Encode(got)
	g.Expect(err).NotTo(HaveOccurred())
	again, err := checkpoint.Decode(b)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.Allocations).To(ConsistOf(got.Allocations))
}

func TestNewerVersionIsRefused(t *testing.T) {
	for _, v := range []string{"contiv-ipam/3", "contiv-ipam/10", "contiv-ipam/123456789012345678901234567890"} {
		t.Run(v, func(t *testing.T) {
			g := NewWithT(t)
			// A newer document may have anything else: the version is read first.
			_, err := checkpoint.Decode([]byte(`{"allocations": [{"future": true}], "version": "` + v + `", "shards": 4}`))
			g.Expect(err).To(MatchError(checkpoint.ErrNewerVersion))
			g.Expect(errors.Is(err, checkpoint.ErrInvalid)).To(BeFalse())
			g.Expect(err.Error()).To(ContainSubstring(`version "` + v + `"`))
			g.Expect(err.Error()).To(ContainSubstring(`this code reads up to "contiv-ipam/2"`))
		})
	}
}

// doc is a "contiv-ipam/2" document with the given allocations.
func doc(allocations string) string {
	return `{"version": "contiv-ipam/2", "node": "n", "takenAt": "2026-11-25T14:50:00Z", "allocations": [` + allocations + `]}`
}

// docV1 is a "contiv-ipam/1" document with the given allocations.
func docV1(allocations string) string {
	return `{"version": "contiv-ipam/1", "allocations": [` + allocations + `]}`
}

const (
	okPod   = `{"pod": {"name": "p", "namespace": "ns"}, "ips": ["10.1.1.2"]}`
	podKeyd = `"pod": {"name": "p", "namespace": "ns"}`
)

func TestBadDocuments(t *testing.T) {
	for _, tc := range []struct{ name, doc, err string }{
		{"empty", ``, `invalid checkpoint: the document: want a JSON object, got nothing`},
		{"garbage", `hello`, `the document: invalid JSON: invalid character 'h'`},
		{"array", `[1, 2]`, `the document: want a JSON object, got [1, 2]`},
		{"trailing data", doc("") + ` {}`, `the document: data after the JSON object: {`},
		{"not closed", `{"version": "contiv-ipam/2"`, `the document: the JSON object is not closed`},
		{"no version", `{"allocations": []}`, `field "version": missing: want "contiv-ipam/2" (or "contiv-ipam/1")`},
		{"null version", `{"version": null, "allocations": []}`, `field "version": want a JSON string, got null`},
		{"version of another format", `{"version": "vpc-cni-ipam/1", "allocations": []}`,
			`field "version": "vpc-cni-ipam/1" is not a version of this format: want "contiv-ipam/2" (or "contiv-ipam/1")`},
		{"version 0", `{"version": "contiv-ipam/0"}`, `"contiv-ipam/0" is not a version of this format`},
		{"version with a leading zero", `{"version": "contiv-ipam/03"}`, `"contiv-ipam/03" is not a version of this format`},
		{"version garbage", `{"version": "contiv-ipam/2x"}`, `"contiv-ipam/2x" is not a version of this format`},
		{"version of another case", `{"Version": "contiv-ipam/2", "allocations": []}`, `field "version": missing`},
		{"version twice", `{"version": "contiv-ipam/2", "version": "contiv-ipam/2", "allocations": []}`, `key "version" given twice`},
		{"unknown top-level field", `{"version": "contiv-ipam/2", "allocations": [], "Node": "x"}`,
			`unknown field "Node" (a document has "version", "node", "takenAt", "allocations")`},
		{"no allocations", `{"version": "contiv-ipam/2"}`, `field "allocations": missing`},
		{"null allocations", `{"version": "contiv-ipam/2", "allocations": null}`, `field "allocations": want a JSON array, got null`},
		{"bad takenAt", `{"version": "contiv-ipam/2", "takenAt": "yesterday", "allocations": []}`,
			`field "takenAt": "yesterday" is not an RFC 3339 time`},
		{"takenAt out of range", `{"version": "contiv-ipam/2", "takenAt": "0000-01-01T00:00:00+01:00", "allocations": []}`,
			`field "takenAt": "0000-01-01T00:00:00+01:00" is out of range`},
		{"node not a string", `{"version": "contiv-ipam/2", "node": 5, "allocations": []}`, `field "node": want a JSON string, got 5`},
		{"entry not an object", doc(okPod + `, "x"`), `allocations[1]: want a JSON object, got "x"`},
		{"unknown entry field", doc(okPod + `, {"pod": {"name": "p2", "namespace": "ns"}, "ips": ["10.1.1.3"], "ip": "10.1.1.3"}`),
			`allocations[1]: unknown field "ip" (an entry has "network", "containerId"`},
		{"entry field of another case", doc(`{"pod": {"name": "p", "namespace": "ns"}, "IPs": ["10.1.1.3"]}`), `allocations[0]: unknown field "IPs"`},
		{"entry field twice", doc(`{` + podKeyd + `, "ips": ["10.1.1.3"], "ips": ["10.1.1.4"]}`), `allocations[0]: key "ips" given twice`},
		{"null field", doc(`{` + podKeyd + `, "ips": ["10.1.1.3"], "network": null}`), `allocations[0]: field "network": want a JSON string, got null`},
		{"seq negative", doc(`{"owner": "o", "seq": -1, "ips": ["10.1.1.3"]}`), `allocations[0]: field "seq": want a non-negative integer, got -1`},
		{"seq a string", doc(`{"owner": "o", "seq": "1", "ips": ["10.1.1.3"]}`), `field "seq": want a non-negative integer, got "1"`},
		{"seq fractional", doc(`{"owner": "o", "seq": 1.5, "ips": ["10.1.1.3"]}`), `field "seq": want a non-negative integer, got 1.5`},
		{"ips not strings", doc(`{` + podKeyd + `, "ips": [10]}`), `field "ips": [0]: want a JSON string, got 10`},
		{"pod unknown field", doc(`{"pod": {"name": "p", "namespace": "ns", "uid": "u"}, "ips": ["10.1.1.3"]}`),
			`allocations[0]: field "pod": unknown field "uid"`},
		{"pod without namespace", doc(`{"pod": {"name": "p"}, "ips": ["10.1.1.3"]}`), `field "pod": want both "name" and "namespace"`},
		{"pod name empty", doc(`{"pod": {"name": "", "namespace": "ns"}, "ips": ["10.1.1.3"]}`), `field "pod": "name" is empty`},
		{"metadata not strings", doc(`{` + podKeyd + `, "ips": ["10.1.1.3"], "metadata": {"n": 1}}`), `field "metadata": key "n": want a JSON string, got 1`},
		{"reservation without deadline", doc(`{"owner": "o", "seq": 1, "ips": ["10.1.1.3"], "reservation": {"id": "x"}}`),
			`field "reservation": want both "id" and "deadline"`},
		{"reservation with an empty id", doc(`{"owner": "o", "seq": 1, "ips": ["10.1.1.3"], "reservation": {"id": "", "deadline": "2026-01-01T00:00:00Z"}}`),
			`allocations[0]: field "reservation": "id" is empty`},
		{"reservation with a zero deadline", doc(`{"owner": "o", "seq": 1, "ips": ["10.1.1.3"], "reservation": {"id": "x", "deadline": "0001-01-01T00:00:00Z"}}`),
			`allocations[0]: field "reservation": "deadline" is zero`},
		{"no key", doc(`{"ips": ["10.1.1.3"]}`), `allocations[0]: no key: want "network", "containerId", "ifName" with "pod"`},
		{"attachment without pod", doc(`{"network": "n", "containerId": "c", "ifName": "eth0", "ips": ["10.1.1.3"]}`),
			`allocations[0]: field "pod": missing: an attachment has`},
		{"attachment without ifName", doc(`{"network": "n", "containerId": "c", ` + podKeyd + `, "ips": ["10.1.1.3"]}`),
			`allocations[0]: field "ifName": missing`},
		{"owner and pod", doc(`{"owner": "o", "seq": 1, ` + podKeyd + `, "ips": ["10.1.1.3"]}`),
			`allocations[0]: field "pod": given with "owner"/"seq"`},
		{"owner and network", doc(`{"owner": "o", "seq": 1, "network": "n", "ips": ["10.1.1.3"]}`),
			`allocations[0]: field "network": given with "owner"/"seq"`},
		{"owner without seq", doc(`{"owner": "o", "ips": ["10.1.1.3"]}`), `allocations[0]: field "seq": missing or 0`},
		{"owner with seq 0", doc(`{"owner": "o", "seq": 0, "ips": ["10.1.1.3"]}`), `allocations[0]: field "seq": missing or 0`},
		{"seq without owner", doc(`{"seq": 4, "ips": ["10.1.1.3"]}`), `allocations[0]: field "owner": missing`},
		{"no ips", doc(`{` + podKeyd + `}`), `allocations[0]: field "ips": 0 addresses: want 1, or 2 of different families`},
		{"three ips", doc(`{` + podKeyd + `, "ips": ["10.1.1.3", "fd00::3", "10.1.1.4"]}`), `field "ips": 3 addresses`},
		{"bad ip", doc(`{` + podKeyd + `, "ips": ["10.1.1.300"]}`), `allocations[0]: field "ips[0]": "10.1.1.300" is not an IP address`},
		{"ip with a zone", doc(`{` + podKeyd + `, "ips": ["10.1.1.3", "fe80::1%eth0"]}`), `field "ips[1]": "fe80::1%eth0" has a zone`},
		{"mapped ip", doc(`{` + podKeyd + `, "ips": ["::ffff:10.1.1.3"]}`), `field "ips[0]": "::ffff:10.1.1.3" is an IPv4-mapped IPv6 address: write it 10.1.1.3`},
		{"two of one family", doc(`{` + podKeyd + `, "ips": ["10.1.1.3", "10.1.1.4"]}`),
			`field "ips[1]": "10.1.1.4" is of the same family as "10.1.1.3"`},
		{"two of one family, v6", doc(`{` + podKeyd + `, "ips": ["fd00::3", "fd00::4"]}`), `field "ips[1]": "fd00::4" is of the same family`},
		{"pools of another length", doc(`{` + podKeyd + `, "ips": ["10.1.1.3", "fd00::3"], "pools": ["10.1.1.0/24"]}`),
			`field "pools": 1 pools for 2 addresses`},
		{"bad pool", doc(`{` + podKeyd + `, "ips": ["10.1.1.3"], "pools": ["10.1.1.0"]}`), `field "pools[0]": "10.1.1.0" is not a prefix`},
		{"pool with host bits", doc(`{` + podKeyd + `, "ips": ["10.1.1.3"], "pools": ["10.1.1.1/24"]}`),
			`field "pools[0]": "10.1.1.1/24" has host bits set: want 10.1.1.0/24`},
		{"pool not containing its ip", doc(`{` + podKeyd + `, "ips": ["10.1.1.3", "fd00::3"], "pools": ["10.1.1.0/24", "fd01::/64"]}`),
			`field "pools[1]": "fd01::/64" does not contain its address "fd00::3"`},
		{"pools in the other order", doc(`{` + podKeyd + `, "ips": ["10.1.1.3", "fd00::3"], "pools": ["fd00::/64", "10.1.1.0/24"]}`),
			`field "pools[0]": "fd00::/64" does not contain its address "10.1.1.3"`},
		{"duplicate attachment key", doc(`{"network": "n", "containerId": "c", "ifName": "eth0", ` + podKeyd + `, "ips": ["10.1.1.3"]},
			{"network": "n", "containerId": "c", "ifName": "eth0", "pod": {"name": "q", "namespace": "ns"}, "ips": ["10.1.1.4"]}`),
			`allocations[1]: the key network "n" containerId "c" ifName "eth0" is also allocations[0]'s`},
		{"duplicate pod key", doc(okPod + `, {` + podKeyd + `, "ips": ["10.1.1.4"]}`), `allocations[1]: the key pod "ns/p" is also allocations[0]'s`},
		{"duplicate owner key", doc(`{"owner": "o", "seq": 2, "ips": ["10.1.1.3"]}, {"owner": "o", "seq": 2, "ips": ["10.1.1.4"]}`),
			`allocations[1]: the key owner "o" seq 2 is also allocations[0]'s`},
		{"duplicate address", doc(`{"owner": "o", "seq": 1, "ips": ["fd00::3"]}, {"owner": "o", "seq": 2, "ips": ["10.1.1.4", "FD00::3"]}`),
			`allocations[1]: field "ips[1]": "fd00::3" is also an address of allocations[0]`},
		{"long value cut", doc(`{` + podKeyd + `, "ips": ["` + strings.Repeat("x", 200) + `"]}`), `"` + strings.Repeat("x", 80) + `"... is not an IP address`},

		{"v1: ips", docV1(`{` + podKeyd + `, "ips": ["10.1.1.3"]}`), `allocations[0]: unknown field "ips" (an entry of contiv-ipam/1 has "network"`},
		{"v1: owner", docV1(`{"owner": "o", "seq": 1, "ip": "10.1.1.3"}`), `allocations[0]: unknown field "owner"`},
		{"v1: pools", docV1(`{` + podKeyd + `, "ip": "10.1.1.3", "pools": ["10.1.1.0/24"]}`), `allocations[0]: unknown field "pools"`},
		{"v1: reservation", docV1(`{` + podKeyd + `, "ip": "10.1.1.3", "reservation": {}}`), `allocations[0]: unknown field "reservation"`},
		{"v1: no ip", docV1(`{` + podKeyd + `}`), `allocations[0]: field "ip": missing`},
		{"v1: no pod", docV1(`{"ip": "10.1.1.3"}`), `allocations[0]: field "pod": missing: every entry of contiv-ipam/1 names its pod`},
		{"v1: bad ip", docV1(`{` + podKeyd + `, "ip": "10.1.1"}`), `allocations[0]: field "ip": "10.1.1" is not an IP address`},
		{"v1: duplicate ip", docV1(`{` + podKeyd + `, "ip": "10.1.1.3"}, {"pod": {"name": "q", "namespace": "ns"}, "ip": "10.1.1.3"}`),
			`allocations[1]: field "ip": "10.1.1.3" is also an address of allocations[0]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := checkpoint.Decode([]byte(tc.doc))
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(tc.err))
			g.Expect(err.Error()).To(HavePrefix("invalid checkpoint: "))
			g.Expect(errors.Is(err, checkpoint.ErrInvalid)).To(BeTrue())
			g.Expect(errors.Is(err, checkpoint.ErrNewerVersion)).To(BeFalse())
		})
	}
}

// Values that parse in more than one spelling are read in their canonical
// form; times in UTC.
func TestDecodeCanonicalizes(t *testing.T) {
	g := NewWithT(t)
	d, err := checkpoint.Decode([]byte(doc(`{` + podKeyd + `, "ips": ["FD00:0::3", "10.1.1.3"], "pools": ["FD00::/64", "10.1.1.0/24"],
		"allocatedAt": "2026-01-01T01:00:00+01:00", "metadata": {}}`)))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Allocations).To(Equal([]checkpoint.Entry{{Pod: &checkpoint.Pod{Name: "p", Namespace: "ns"},
		IPs: []string{"fd00::3", "10.1.1.3"}, Pools: []string{"fd00::/64", "10.1.1.0/24"},
		AllocatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}}))
}
