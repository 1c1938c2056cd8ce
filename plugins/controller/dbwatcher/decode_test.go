package dbwatcher

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	"google.golang.org/protobuf/proto"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/plugins/controller/dbresources"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// The parallel decode gives every key what a sequential Decode gives it,
// at its own index: values, keywords and errors (bad values and unknown
// keys spread among the good ones), for counts around the split points.
func TestParallelDecodeIsTheSequentialOne(t *testing.T) {
	for _, n := range []int{0, 1, parallelDecodeMin - 1, parallelDecodeMin, 3*parallelDecodeMin + 7} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			g := NewWithT(t)
			kvs := make([]kvdb.KeyValue, n)
			for i := range kvs {
				pod := &podmodel.Pod{Name: fmt.Sprintf("p%d", i), Namespace: "ns", IpAddress: fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)}
				value, err := codec.Marshal(pod)
				g.Expect(err).NotTo(HaveOccurred())
				kvs[i] = kvdb.KeyValue{Key: podmodel.Key(pod.Name, pod.Namespace), Value: value}
				switch i % 97 {
				case 13:
					kvs[i].Value = []byte("{not json")
				case 29:
					kvs[i].Key = "no/such/resource"
				}
			}
			got := decodeParallel(kvs)
			g.Expect(got).To(HaveLen(n))
			if n > 0 {
				g.Expect(got[0].err).NotTo(HaveOccurred(), "a good key decodes")
				g.Expect(got[0].keyword).To(Equal(podmodel.Keyword))
			}
			for i, kv := range kvs {
				kw, value, err := dbresources.Decode(kv.Key, kv.Value)
				g.Expect(got[i].keyword).To(Equal(kw), "key %d", i)
				g.Expect(got[i].err != nil).To(Equal(err != nil), "key %d: %v", i, got[i].err)
				g.Expect(proto.Equal(got[i].value, value)).To(BeTrue(), "key %d", i)
			}
		})
	}
}
