package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/ipam/checkpoint"
)

// awsFixture is an IPAM checkpoint written by the AWS VPC CNI's own
// datastore code (tests/awsdiff writes it: go test -run
// TestAWSCheckpointFixture -args -update): ENI addresses of node 1's pod
// subnet 10.1.0.16/28 under testenv.DualStackConf, and one outside it.
const awsFixture = "testdata/aws-vpc-cni-ipam.json"

// The attachments of awsFixture (their order in the file is the
// datastore's map order).
var awsFixtureIPs = map[string]string{"c-web-0": "10.1.0.18", "c-web-1": "10.1.0.20", "c-db-0": "10.1.0.21", "c-far-0": "10.1.7.9"}

// import -from aws-vpc-cni converts the AWS file and POSTs our document:
// every entry an attachment with its pod and address.
func TestImportAnAWSFile(t *testing.T) {
	g := NewWithT(t)
	f := newFakeAgent(t)
	f.importBody = `{"imported": 3, "skipped": 1, "skippedReasons": ["allocations[3]: ip 10.1.7.9: not in a pod subnet of this node (10.1.0.16/28)"]}`
	mtime := time.Date(2026, 11, 28, 9, 30, 0, 0, time.UTC)
	file := filepath.Join(t.TempDir(), "ipam.json")
	raw, err := os.ReadFile(awsFixture)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(file, raw, 0o600)).To(Succeed())
	g.Expect(os.Chtimes(file, mtime, mtime)).To(Succeed())

	res := netctl(t, nil, "", args(creds(f), "ipam", "checkpoint", "import", "-from", "aws-vpc-cni", file)...)
	g.Expect(res.code).To(Equal(exitOK), res.stderr)
	g.Expect(res.stderr).To(BeEmpty())
	g.Expect(res.stdout).To(Equal("imported 3 allocations, skipped 1 (from " + file + ": 4 allocations of an AWS VPC CNI checkpoint (vpc-cni-ipam/1), written at 2026-11-28T09:30:00Z)\n" +
		"skipped: allocations[3]: ip 10.1.7.9: not in a pod subnet of this node (10.1.0.16/28)\n"))
	reqs := f.received()
	g.Expect(reqs).To(HaveLen(1))
	g.Expect(reqs[0].path).To(Equal("/contiv/v1/ipam/checkpoint"))
	g.Expect(reqs[0].query).To(Equal("replace=false"))
	sent, err := checkpoint.Decode([]byte(reqs[0].body))
	g.Expect(err).NotTo(HaveOccurred(), "our format, not the AWS file")
	g.Expect(sent.TakenAt).To(Equal(mtime))
	g.Expect(sent.Allocations).To(HaveLen(4))
	for _, e := range sent.Allocations {
		g.Expect(e.Network).To(Equal("aws-cni"))
		g.Expect(e.IfName).To(Equal("eth0"))
		g.Expect(e.IPs).To(Equal([]string{awsFixtureIPs[e.ContainerID]}), e.ContainerID)
		g.Expect(e.Pod).To(Equal(&checkpoint.Pod{Namespace: "default", Name: strings.TrimPrefix(e.ContainerID, "c-")}))
		g.Expect(e.AllocatedAt.IsZero()).To(BeFalse())
		g.Expect(e.Metadata).To(Equal(map[string]string{"importedFrom": "vpc-cni-ipam/1"}))
	}

	// From stdin, with -replace; -from after -replace.
	res = netctl(t, nil, string(raw), args(creds(f), "ipam", "checkpoint", "import", "-replace", "-from=aws-vpc-cni", "-")...)
	g.Expect(res.code).To(Equal(exitOK), res.stderr)
	g.Expect(res.stdout).To(HavePrefix("imported 3 allocations, skipped 1 (from stdin: 4 allocations of an AWS VPC CNI checkpoint (vpc-cni-ipam/1), written at "))
	g.Expect(f.received()[1].query).To(Equal("replace=true"))
}

// A bad AWS file is refused before anything is sent, naming the entry,
// the field and the value; an AWS file without -from is refused with a
// hint; an unknown -from is a usage error.
func TestImportRefusesABadAWSFile(t *testing.T) {
	good, err := os.ReadFile(awsFixture)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, doc, msg string }{
		{"our format", sampleDoc, `field "version": "contiv-ipam/2" is not the version of an AWS VPC CNI checkpoint: want "vpc-cni-ipam/1"; nothing sent`},
		{"bad address", strings.Replace(string(good), `"10.1.0.20"`, `"10.1.0.260"`, 1), `field "ipv4": "10.1.0.260" is not an IP address; nothing sent`},
		{"no pod", strings.Replace(string(good), `"k8sPodName":"web-1"`, `"k8sPodName":""`, 1), `field "metadata.k8sPodName": missing or empty`},
		{"garbage", "garbage", "invalid checkpoint: the AWS VPC CNI checkpoint: invalid JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			f := newFakeAgent(t)
			doc := filepath.Join(t.TempDir(), "ipam.json")
			g.Expect(os.WriteFile(doc, []byte(tc.doc), 0o600)).To(Succeed())
			res := netctl(t, nil, "", args(creds(f), "ipam", "checkpoint", "import", "-from", "aws-vpc-cni", doc)...)
			g.Expect(res.code).To(Equal(exitError))
			g.Expect(res.stderr).To(HavePrefix("contiv-netctl: ipam checkpoint import: " + doc + ": invalid checkpoint: "))
			g.Expect(res.stderr).To(ContainSubstring(tc.msg))
			g.Expect(f.received()).To(BeEmpty())
		})
	}
	t.Run("without -from", func(t *testing.T) {
		g := NewWithT(t)
		f := newFakeAgent(t)
		res := netctl(t, nil, string(good), args(creds(f), "ipam", "checkpoint", "import", "-")...)
		g.Expect(res.code).To(Equal(exitError))
		g.Expect(res.stderr).To(ContainSubstring(`"vpc-cni-ipam/1" is not a version of this format`))
		g.Expect(res.stderr).To(ContainSubstring("(an AWS VPC CNI checkpoint: import it with -from aws-vpc-cni); nothing sent"))
		g.Expect(f.received()).To(BeEmpty())
	})
	t.Run("unknown -from", func(t *testing.T) {
		g := NewWithT(t)
		f := newFakeAgent(t)
		res := netctl(t, nil, string(good), args(creds(f), "ipam", "checkpoint", "import", "-from", "calico", "-")...)
		g.Expect(res.code).To(Equal(exitUsage))
		g.Expect(res.stderr).To(ContainSubstring(`ipam checkpoint import: -from "calico": want contiv (a contiv checkpoint, the default) or aws-vpc-cni`))
		g.Expect(f.received()).To(BeEmpty())
	})
}

// The new flag is in every usage that lists import.
func TestImportUsageNamesFrom(t *testing.T) {
	for _, words := range [][]string{{"-h"}, {"ipam", "-h"}, {"ipam", "checkpoint", "-h"}, {"ipam", "checkpoint", "import", "-h"}} {
		t.Run(strings.Join(words, " "), func(t *testing.T) {
			g := NewWithT(t)
			res := netctl(t, nil, "", words...)
			g.Expect(res.code).To(Equal(exitOK), res.stderr)
			g.Expect(res.stdout).To(ContainSubstring("import -from aws-vpc-cni [-replace] file|-"))
		})
	}
	g := NewWithT(t)
	res := netctl(t, nil, "", "ipam", "checkpoint", "import", "-h")
	g.Expect(res.stdout).To(ContainSubstring("-from format"))
	g.Expect(res.stdout).To(ContainSubstring(`(default "contiv")`))
}
