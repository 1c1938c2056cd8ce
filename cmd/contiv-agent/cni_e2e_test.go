package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/contiv-ipam/agent/plugins/podmanager/cni"
)

// TestAgentBinaryServesCNIAddOnItsSocket runs the real binary with the
// socket in the temp dir: the socket is mode 0600, an Add over it returns
// an address of the node's pod subnet (node ID 1: 10.1.1.0/24) with the
// subnet's prefix length, gateway .1 and a default route; Check, Delete and
// Status answer; SIGINT removes the socket.
func TestAgentBinaryServesCNIAddOnItsSocket(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	writeRunConfig(t, dir, "127.0.0.1:0")
	p := startAgent(t, dir)
	base := p.waitReady(t)
	waitReadiness(t, base)

	sock := filepath.Join(dir, "cni.sock")
	fi, err := os.Stat(sock)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fi.Mode().Type()).To(Equal(os.ModeSocket))
	g.Expect(fi.Mode().Perm()).To(Equal(os.FileMode(0o600)))

	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = conn.Close() }()
	client := cni.NewRemoteCNIClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	req := &cni.CNIRequest{
		Version: "1.1.0", ContainerId: "c-e2e", NetworkNamespace: "/var/run/netns/c-e2e",
		InterfaceName: "eth0", NetworkName: "k8s-pod-network",
		ExtraArguments: "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-e2e",
	}
	reply, err := client.Add(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reply.GetResult()).To(Equal(cni.CNIReply_OK), "code %d: %s", reply.GetErrorCode(), reply.GetError())
	g.Expect(reply.GetInterfaces()).To(HaveLen(1))
	itf := reply.GetInterfaces()[0]
	g.Expect(itf.GetName()).To(Equal("eth0"))
	g.Expect(itf.GetSandbox()).To(Equal("/var/run/netns/c-e2e"))
	g.Expect(itf.GetIpAddresses()).To(HaveLen(1))
	ip := itf.GetIpAddresses()[0]
	m := regexp.MustCompile(`^10\.1\.(\d+)\.(\d+)/24$`).FindStringSubmatch(ip.GetAddress())
	g.Expect(m).NotTo(BeNil(), "address %q is not in a /24 of 10.1.0.0/16", ip.GetAddress())
	gw := "10.1." + m[1] + ".1"
	g.Expect(ip.GetGateway()).To(Equal(gw))
	g.Expect(reply.GetRoutes()).To(HaveLen(1))
	g.Expect(reply.GetRoutes()[0].GetDst()).To(Equal("0.0.0.0/0"))
	g.Expect(reply.GetRoutes()[0].GetGw()).To(Equal(gw))

	again, err := client.Add(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.GetInterfaces()).To(HaveLen(1))
	g.Expect(again.GetInterfaces()[0].GetIpAddresses()[0].GetAddress()).To(Equal(ip.GetAddress()), "a repeated Add keeps the address")

	req.PrevIps = []string{ip.GetAddress()}
	check, err := client.Check(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(check.GetResult()).To(Equal(cni.CNIReply_OK), check.GetError())
	status, err := client.Status(ctx, &cni.StatusRequest{NetworkName: "k8s-pod-network"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status.GetResult()).To(Equal(cni.CNIReply_OK), status.GetError())

	del, err := client.Delete(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(del.GetResult()).To(Equal(cni.CNIReply_OK), del.GetError())
	check, err = client.Check(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(check.GetErrorCode()).To(Equal(cni.CodeCheckFailed), "after Delete: %s", check.GetError())

	g.Expect(p.stop(t)).To(Succeed())
	_, err = os.Lstat(sock)
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "the socket is removed at exit: %v", err)
}

// TestSecondAgentOnTheSameSocketExitsBeforeCreatingAnything: a second
// agent whose podmanager.conf names the socket of a running agent exits 1
// naming the socket, before its etcd or bolt files exist.
func TestSecondAgentOnTheSameSocketExitsBeforeCreatingAnything(t *testing.T) {
	g := NewWithT(t)
	dir1 := t.TempDir()
	writeRunConfig(t, dir1, "127.0.0.1:0")
	first := startAgent(t, dir1)
	first.waitReady(t)
	sock := filepath.Join(dir1, "cni.sock")

	dir2 := t.TempDir()
	writeRunConfig(t, dir2, "127.0.0.1:0")
	writeFile(t, filepath.Join(dir2, "podmanager.conf"), "socketPath: "+sock+"\n")
	code, out := runToExit(t, dir2, []string{"-config-dir", dir2}, "MICROSERVICE_LABEL=e2e-node-2")
	g.Expect(code).To(Equal(1), out)
	g.Expect(out).To(And(ContainSubstring(sock), ContainSubstring("another agent serves it")))
	for _, p := range []string{filepath.Join(dir2, "data", "bolt.db"), filepath.Join(dir2, "etcd")} {
		_, err := os.Stat(p)
		g.Expect(os.IsNotExist(err)).To(BeTrue(), "%s must not exist: %v", p, err)
	}
	g.Expect(first.stop(t)).To(Succeed())
}
