package vppnode_test

import (
	"math"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
)

func TestKey(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	g.Expect(vppnode.Key(1)).To(Equal("allocatedIDs/1"))
	g.Expect(vppnode.Key(42)).To(Equal("allocatedIDs/42"))
	g.Expect(vppnode.Key(math.MaxUint32)).To(Equal("allocatedIDs/4294967295"))
}

func TestParseKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		key     string
		want    uint32
		wantErr string
	}{
		{name: "one", key: "allocatedIDs/1", want: 1},
		{name: "many digits", key: "allocatedIDs/1234", want: 1234},
		{name: "max", key: "allocatedIDs/4294967295", want: math.MaxUint32},
		{name: "zero", key: "allocatedIDs/0", wantErr: `invalid node ID key "allocatedIDs/0": node ID 0 is not valid`},
		{name: "leading zero", key: "allocatedIDs/07", wantErr: `invalid node ID key "allocatedIDs/07": node ID has a leading zero`},
		{name: "overflow", key: "allocatedIDs/4294967296", wantErr: `want a decimal node ID from 1 to 4294967295`},
		{name: "negative", key: "allocatedIDs/-1", wantErr: `want a decimal node ID`},
		{name: "plus sign", key: "allocatedIDs/+1", wantErr: `want a decimal node ID`},
		{name: "hex", key: "allocatedIDs/0x1", wantErr: `leading zero`},
		{name: "word", key: "allocatedIDs/one", wantErr: `invalid node ID key "allocatedIDs/one": want a decimal node ID`},
		{name: "spaces", key: "allocatedIDs/ 1", wantErr: `want a decimal node ID`},
		{name: "empty id", key: "allocatedIDs/", wantErr: `want a decimal node ID`},
		{name: "trailing slash", key: "allocatedIDs/1/", wantErr: `want a decimal node ID`},
		{name: "other resource", key: "k8s/node/1", wantErr: `invalid node ID key "k8s/node/1": want prefix "allocatedIDs/"`},
		{name: "absolute", key: "/vnf-agent/contiv-ksr/allocatedIDs/1", wantErr: `want prefix`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			id, err := vppnode.ParseKey(tc.key)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(vppnode.ErrInvalidKey))
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				g.Expect(id).To(BeZero())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(id).To(Equal(tc.want))
			g.Expect(vppnode.Key(id)).To(Equal(tc.key))
		})
	}
}

// FuzzParseKey: ParseKey never panics, never returns 0 without an error, a
// key it accepts is exactly Key of its result, and every ID but 0 round-trips.
func FuzzParseKey(f *testing.F) {
	f.Add("allocatedIDs/1", uint32(1))
	f.Add("allocatedIDs/0", uint32(0))
	f.Add("allocatedIDs/007", uint32(7))
	f.Add("allocatedIDs/4294967296", uint32(math.MaxUint32))
	f.Fuzz(func(t *testing.T, key string, id uint32) {
		if got, err := vppnode.ParseKey(key); err == nil {
			if got == 0 || vppnode.Key(got) != key {
				t.Fatalf("ParseKey(%q) = %d, Key gives %q", key, got, vppnode.Key(got))
			}
		}
		got, err := vppnode.ParseKey(vppnode.Key(id))
		if id == 0 {
			if err == nil {
				t.Fatalf("ParseKey(Key(0)) succeeded")
			}
			return
		}
		if err != nil || got != id {
			t.Fatalf("ParseKey(Key(%d)) = %d, %v", id, got, err)
		}
	})
}
