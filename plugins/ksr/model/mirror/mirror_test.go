package mirror

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

// A marker goes through the store and the watchers' generic struct
// unchanged; a bad one is refused naming the field.
func TestMarkerRoundTrip(t *testing.T) {
	g := NewWithT(t)
	m := Marker{Leader: "ksr-0/1", ResourceVersion: "4711", Pods: 3, Heartbeat: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC), Interval: "10s"}
	got, err := Parse(m.Encode())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(m))
	g.Expect(got.Period()).To(Equal(10 * time.Second))

	var s structpb.Struct
	g.Expect(protojson.Unmarshal(m.Encode(), &s)).To(Succeed())
	got, err = FromStruct(&s)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Heartbeat.Equal(m.Heartbeat)).To(BeTrue())
	g.Expect(got.Pods).To(Equal(3))

	for _, tc := range []struct{ value, want string }{
		{`garbage{{`, "mirror marker"},
		{`{"pods":1,"interval":"10s"}`, "heartbeat is missing"},
		{`{"heartbeat":"2026-11-28T12:00:00Z","interval":"soon"}`, `interval "soon"`},
		{`{"heartbeat":"2026-11-28T12:00:00Z","interval":"10s","pods":-1}`, "pods -1"},
		{`{"heartbeat":"2026-11-28T12:00:00Z","interval":"10s","pods":"many"}`, "mirror marker"},
	} {
		_, err := Parse([]byte(tc.value))
		g.Expect(err).To(MatchError(ContainSubstring(tc.want)), tc.value)
	}
}
