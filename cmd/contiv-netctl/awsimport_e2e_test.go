package main

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/ipam/checkpoint"
	"github.com/contiv-ipam/agent/tests/testenv"
)

// A node moving from the AWS VPC CNI: the contiv-netctl binary imports
// the checkpoint the AWS datastore wrote into a real agent, which then
// holds each pod's address under its CNI key and hands it back to the
// pod's CNI ADD; the entry outside the node's pod subnet is skipped with
// its reason; an export gives back the imported entries.
func TestEndToEndImportFromAWS(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no agent binaries")
	}
	g := NewWithT(t)
	a := startE2EAgent(t, "netctl-aws")
	code, info := a.Get(t, "/contiv/v1/ipam")
	g.Expect(code).To(Equal(http.StatusOK))
	var ipamInfo struct {
		PodSubnetThisNode string `json:"podSubnetThisNode"`
	}
	g.Expect(json.Unmarshal(info, &ipamInfo)).To(Succeed())
	g.Expect(ipamInfo.PodSubnetThisNode).To(Equal("10.1.0.16/28"), "the subnet the AWS fixture's addresses were written for")

	res := binNetctl(t, a, "ipam", "checkpoint", "import", "-from", "aws-vpc-cni", awsFixture)
	g.Expect(res.code).To(Equal(exitOK), res.stderr)
	g.Expect(res.stdout).To(HavePrefix("imported 3 allocations, skipped 1 (from " + awsFixture + ": 4 allocations of an AWS VPC CNI checkpoint (vpc-cni-ipam/1), written at "))
	g.Expect(res.stdout).To(MatchRegexp(`skipped: allocations\[\d\]: ip 10\.1\.7\.9: not in a pod subnet of this node`))

	code, allocs := a.Get(t, "/contiv/v1/ipam/allocations")
	g.Expect(code).To(Equal(http.StatusOK))
	for cid, ip := range awsFixtureIPs {
		if cid == "c-far-0" {
			g.Expect(string(allocs)).NotTo(ContainSubstring(ip))
			continue
		}
		g.Expect(string(allocs)).To(ContainSubstring(`"`+ip+`"`), cid)
	}

	// The pod's CNI ADD under its AWS key (network "aws-cni") gets its
	// AWS address back.
	g.Expect(cniAddNetwork(t, a.Socket, "aws-cni", "web-0", "c-web-0")).To(HavePrefix(awsFixtureIPs["c-web-0"] + "/"))

	file := filepath.Join(t.TempDir(), "after.json")
	res = binNetctl(t, a, "ipam", "checkpoint", "export", "-o", file)
	g.Expect(res.code).To(Equal(exitOK), res.stderr)
	exported := readCheckpoint(t, file)
	g.Expect(exported.Allocations).To(HaveLen(3))
	for _, e := range exported.Allocations {
		g.Expect(e.Network).To(Equal("aws-cni"))
		g.Expect(e.IPs[0]).To(Equal(awsFixtureIPs[e.ContainerID]))
		g.Expect(e.Pod.Name).To(Equal(e.ContainerID[2:]))
	}

	// A second import without -replace is refused: the node holds them.
	res = binNetctl(t, a, "ipam", "checkpoint", "import", "-from", "aws-vpc-cni", awsFixture)
	g.Expect(res.code).To(Equal(exitError))
	g.Expect(res.stderr).To(ContainSubstring("(4 allocations of an AWS VPC CNI checkpoint): POST "))
	g.Expect(res.stderr).To(ContainSubstring("409 Conflict: importing a checkpoint: 3 allocations held"))
}

// cniAddNetwork runs contiv-cni ADD for pod default/name, container cid,
// interface eth0, on network (the CNI configuration's name), and returns
// the first address of its result.
func cniAddNetwork(t *testing.T, socket, network, name, cid string) string {
	t.Helper()
	cmd := exec.Command(testenv.Binaries().CNI)
	cmd.Env = append(os.Environ(), "CNI_COMMAND=ADD", "CNI_CONTAINERID="+cid, "CNI_NETNS=/var/run/netns/"+cid,
		"CNI_IFNAME=eth0", "CNI_PATH="+testenv.Binaries().Dir,
		"CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME="+name+";K8S_POD_INFRA_CONTAINER_ID="+cid)
	cmd.Stdin = strings.NewReader(`{"cniVersion": "1.0.0", "name": "` + network + `", "type": "contiv-cni", "grpcServer": "` + socket + `"}`)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("contiv-cni ADD %s on %s: %v: %s", name, network, err, out)
	}
	var res struct {
		IPs []struct {
			Address string `json:"address"`
		} `json:"ips"`
	}
	if err := json.Unmarshal(out, &res); err != nil || len(res.IPs) == 0 {
		t.Fatalf("contiv-cni ADD %s: result %s: %v", name, out, err)
	}
	return res.IPs[0].Address
}

// readCheckpoint decodes a checkpoint file.
func readCheckpoint(t *testing.T, file string) checkpoint.Data {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	d, err := checkpoint.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
