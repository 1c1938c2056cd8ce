package checkpoint_test

import (
	"errors"
	"os"
	"reflect"
	"testing"

	"github.com/contiv-ipam/agent/plugins/ipam/checkpoint"
)

// FuzzDecode: Decode never panics, refuses with ErrInvalid or
// ErrNewerVersion only, and whatever it accepts Encode writes back and
// Decode reads to the same Data (Encode sorts the entries by first
// address: they are compared by it), and Encode writes that again byte for
// byte.
func FuzzDecode(f *testing.F) {
	rich, err := checkpoint.Encode(rich())
	if err != nil {
		f.Fatal(err)
	}
	v1, err := os.ReadFile("testdata/v1.json")
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		string(rich), string(v1), doc(""), doc(okPod), docV1(`{` + podKeyd + `, "ip": "10.1.1.3"}`),
		`{"version": "contiv-ipam/3"}`, `{"version": "vpc-cni-ipam/1", "allocations": []}`, ``, `null`, `[]`, `{}`,
		doc(`{"owner": "o", "seq": 18446744073709551615, "ips": ["fd00::1", "10.0.0.1"], "pools": ["fd00::/127", "10.0.0.0/31"]}`),
		doc(`{` + podKeyd + `, "ips": ["10.1.1.3"], "allocatedAt": "0000-01-01T00:00:00Z", "metadata": {"\u00e9": "<&>"}}`),
		doc(`{"owner": "o", "seq": 1, "ips": ["10.1.1.3"], "reservation": {"id": "x", "deadline": "9999-12-31T23:59:59.999999999Z"}}`),
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := checkpoint.Decode(b)
		if err != nil {
			if !errors.Is(err, checkpoint.ErrInvalid) && !errors.Is(err, checkpoint.ErrNewerVersion) {
				t.Fatalf("Decode: an error of neither kind: %v", err)
			}
			return
		}
		if d.Version != checkpoint.Version || d.Allocations == nil {
			t.Fatalf("Decode: version %q, allocations %v", d.Version, d.Allocations)
		}
		enc, err := checkpoint.Encode(d)
		if err != nil {
			t.Fatalf("Encode of what Decode accepted: %v\ninput: %s", err, b)
		}
		again, err := checkpoint.Decode(enc)
		if err != nil {
			t.Fatalf("Decode of what Encode wrote: %v\nwritten: %s", err, enc)
		}
		enc2, err := checkpoint.Encode(again)
		if err != nil {
			t.Fatalf("Encode again: %v", err)
		}
		if string(enc2) != string(enc) {
			t.Fatalf("Encode is not stable:\n%s\n%s", enc, enc2)
		}
		if !sameData(d, again) {
			t.Fatalf("round trip changed the data:\n%+v\n%+v", d, again)
		}
	})
}

// sameData compares a decoded document with its re-encoded reading: the
// same fields, the same entries in any order.
func sameData(a, b checkpoint.Data) bool {
	if a.Version != b.Version || a.Node != b.Node || !a.TakenAt.Equal(b.TakenAt) || a.TakenAt != b.TakenAt ||
		len(a.Allocations) != len(b.Allocations) {
		return false
	}
	byIP := map[string]checkpoint.Entry{}
	for _, e := range b.Allocations {
		byIP[e.IPs[0]] = e
	}
	for _, e := range a.Allocations {
		o, ok := byIP[e.IPs[0]]
		if !ok || !reflect.DeepEqual(e, o) {
			return false
		}
	}
	return true
}
