package checkpoint_test

import (
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/ipam/checkpoint"
)

// awsDoc is an AWS VPC CNI checkpoint of two attachments, one per
// family, in the form its datastore writes.
const awsDoc = `{"version":"vpc-cni-ipam/1","allocations":[` +
	`{"networkName":"aws-cni","containerID":"c1","ifName":"eth0","ipv4":"10.1.1.5","allocationTimestamp":1764370000123456789,` +
	`"metadata":{"k8sPodNamespace":"default","k8sPodName":"web-0","interfacesCount":1}},` +
	`{"networkName":"aws-cni","containerID":"c2","ifName":"eth0","ipv6":"2001:db8::5","allocationTimestamp":0,` +
	`"metadata":{"k8sPodNamespace":"kube-system","k8sPodName":"dns-0"}}]}`

// Each AWS entry becomes an attachment with its pod, its address, its
// time (none for 0) and the import's metadata; the result encodes.
func TestDecodeAWS(t *testing.T) {
	g := NewWithT(t)
	d, err := checkpoint.DecodeAWS([]byte(awsDoc), t0)
	g.Expect(err).NotTo(HaveOccurred())
	meta := map[string]string{checkpoint.AWSImportedFrom: checkpoint.AWSVersion}
	g.Expect(d).To(Equal(checkpoint.Data{Version: checkpoint.Version, TakenAt: t0, Allocations: []checkpoint.Entry{
		{Network: "aws-cni", ContainerID: "c1", IfName: "eth0", Pod: &checkpoint.Pod{Name: "web-0", Namespace: "default"},
			IPs: []string{"10.1.1.5"}, AllocatedAt: time.Unix(0, 1764370000123456789).UTC(), Metadata: meta},
		{Network: "aws-cni", ContainerID: "c2", IfName: "eth0", Pod: &checkpoint.Pod{Name: "dns-0", Namespace: "kube-system"},
			IPs: []string{"2001:db8::5"}, Metadata: meta},
	}}))
	doc, err := checkpoint.Encode(d)
	g.Expect(err).NotTo(HaveOccurred())
	back, err := checkpoint.Decode(doc)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(back).To(Equal(d))

	empty, err := checkpoint.DecodeAWS([]byte(`{"version":"vpc-cni-ipam/1","allocations":[]}`), t0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(empty.Allocations).To(BeEmpty())
}

// A bad AWS file is refused, naming the entry, the AWS field and the
// value.
func TestDecodeAWSRefusals(t *testing.T) {
	entry := func(fields string) string {
		return `{"version":"vpc-cni-ipam/1","allocations":[{` + fields + `}]}`
	}
	const key = `"networkName":"aws-cni","containerID":"c1","ifName":"eth0",`
	const meta = `"metadata":{"k8sPodNamespace":"default","k8sPodName":"web-0"}`
	for _, tc := range []struct{ name, doc, msg string }{
		{"not JSON", `{"version":`, "the AWS VPC CNI checkpoint: "},
		{"our format", `{"version":"contiv-ipam/2","allocations":[]}`,
			`field "version": "contiv-ipam/2" is not the version of an AWS VPC CNI checkpoint: want "vpc-cni-ipam/1"`},
		{"no version", `{"allocations":[]}`, `field "version": missing: want "vpc-cni-ipam/1"`},
		{"no allocations", `{"version":"vpc-cni-ipam/1"}`, `field "allocations": missing`},
		{"unknown top field", `{"version":"vpc-cni-ipam/1","allocations":[],"node":"x"}`, `unknown field "node"`},
		{"bad ipv4", entry(key + `"ipv4":"10.1.1.300",` + meta), `allocations[0]: field "ipv4": "10.1.1.300" is not an IP address`},
		{"ipv6 in ipv4", entry(key + `"ipv4":"2001:db8::1",` + meta), `allocations[0]: field "ipv4": "2001:db8::1" is not an IPv4 address`},
		{"ipv4 in ipv6", entry(key + `"ipv6":"10.1.1.5",` + meta), `allocations[0]: field "ipv6": "10.1.1.5" is not an IPv6 address`},
		{"no address", entry(key + meta), `allocations[0]: field "ipv4": missing (and no "ipv6")`},
		{"empty containerID", entry(`"networkName":"aws-cni","containerID":"","ifName":"eth0","ipv4":"10.1.1.5",` + meta),
			`allocations[0]: field "containerID": missing or empty`},
		{"no ifName", entry(`"networkName":"aws-cni","containerID":"c1","ipv4":"10.1.1.5",` + meta), `allocations[0]: field "ifName": missing or empty`},
		{"no pod name", entry(key + `"ipv4":"10.1.1.5","metadata":{"k8sPodNamespace":"default"}`),
			`allocations[0]: field "metadata.k8sPodName": missing or empty`},
		{"empty metadata", entry(key + `"ipv4":"10.1.1.5","metadata":{}`), `allocations[0]: field "metadata.k8sPodNamespace": missing or empty`},
		{"no metadata", entry(key + `"ipv4":"10.1.1.5"`), `allocations[0]: field "metadata": missing`},
		{"negative time", entry(key + `"ipv4":"10.1.1.5","allocationTimestamp":-5,` + meta),
			`allocations[0]: field "allocationTimestamp": -5 is negative`},
		{"time as string", entry(key + `"ipv4":"10.1.1.5","allocationTimestamp":"5",` + meta),
			`allocations[0]: field "allocationTimestamp": want an integer, got "5"`},
		{"time too big", entry(key + `"ipv4":"10.1.1.5","allocationTimestamp":99999999999999999999,` + meta),
			`allocations[0]: field "allocationTimestamp": want an integer of 64 bits, got 99999999999999999999`},
		{"unknown entry field", entry(key + `"ipv4":"10.1.1.5","pod":"x",` + meta), `allocations[0]: unknown field "pod"`},
		{"unknown metadata field", entry(key + `"ipv4":"10.1.1.5","metadata":{"k8sPodName":"a","k8sPodNamespace":"b","uid":"u"}`),
			`allocations[0]: field "metadata": unknown field "uid"`},
		{"metadata name not a string", entry(key + `"ipv4":"10.1.1.5","metadata":{"k8sPodName":5,"k8sPodNamespace":"b"}`),
			`allocations[0]: field "metadata": field "k8sPodName": want a JSON string, got 5`},
		{"duplicate key", `{"version":"vpc-cni-ipam/1","allocations":[{` + key + `"ipv4":"10.1.1.5",` + meta + `},{` + key + `"ipv4":"10.1.1.6",` + meta + `}]}`,
			`allocations[1]: networkName "aws-cni" containerID "c1" ifName "eth0" is also allocations[0]'s`},
		{"duplicate address", `{"version":"vpc-cni-ipam/1","allocations":[{` + key + `"ipv4":"10.1.1.5",` + meta + `},` +
			`{"networkName":"aws-cni","containerID":"c2","ifName":"eth0","ipv4":"10.1.1.5",` + meta + `}]}`,
			`allocations[1]: field "ipv4": "10.1.1.5" is also the address of allocations[0]`},
		{"key twice", entry(key + `"ipv4":"10.1.1.5","ipv4":"10.1.1.6",` + meta), `allocations[0]: key "ipv4" given twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := checkpoint.DecodeAWS([]byte(tc.doc), t0)
			g.Expect(err).To(MatchError(checkpoint.ErrInvalid))
			g.Expect(err.Error()).To(ContainSubstring(tc.msg))
		})
	}
}

// Our decoder refuses an AWS file, naming its version; the AWS decoder
// reads no file of ours.
func TestTheTwoFormatsAreTold(t *testing.T) {
	g := NewWithT(t)
	_, err := checkpoint.Decode([]byte(awsDoc))
	g.Expect(err).To(MatchError(ContainSubstring(`"vpc-cni-ipam/1" is not a version of this format`)))
	v1, err := os.ReadFile("testdata/v1.json")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = checkpoint.DecodeAWS(v1, t0)
	g.Expect(err).To(MatchError(ContainSubstring(`"contiv-ipam/1" is not the version of an AWS VPC CNI checkpoint`)))
}
