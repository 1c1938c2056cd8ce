package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"golang.org/x/net/html"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/contiv-ipam/agent/infra/rest/resttest/htmlq"
	"github.com/contiv-ipam/agent/plugins/ipam"
	"github.com/contiv-ipam/agent/plugins/podmanager/cni"
	"github.com/contiv-ipam/agent/tests/testenv"
)

// TestMain builds the binaries the agent test runs (tests/testenv).
func TestMain(m *testing.M) { testenv.Main(m) }

// ScreenshotDirEnv names a directory that also gets the agent page's
// screenshot as agent-status.png (`make screenshots`: docs/images).
const ScreenshotDirEnv = "CONTIV_SCREENSHOT_DIR"

// TestAgentStatusPage runs a real contiv-agent (embedded etcd, bolt), makes
// three CNI ADDs and one that fails through its gRPC socket, and looks at
// its status page in chromium.
func TestAgentStatusPage(t *testing.T) {
	Require(t)
	g := NewWithT(t)
	a := testenv.StartAgent(t, testenv.Options{Node: "browser-node"})

	conn, err := grpc.NewClient("unix://"+a.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = conn.Close() })
	rc := cni.NewRemoteCNIClient(conn)
	for i := range 3 {
		reply, err := rc.Add(callCtx(t), addRequest(fmt.Sprintf("c%d", i), fmt.Sprintf("web-%d", i)))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(reply.GetResult()).To(Equal(cni.CNIReply_OK), reply.GetError())
	}
	bad := addRequest("c9", "<script>alert(1)</script>")
	bad.InterfaceName = "bad/name"
	reply, err := rc.Add(callCtx(t), bad)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reply.GetResult()).To(Equal(cni.CNIReply_ERROR))

	var info ipam.NodeIPAMInfo
	getJSON(t, a, ipam.IPAMPath, &info)
	var stats struct {
		Pools []struct {
			CIDR     string `json:"cidr"`
			Total    uint64 `json:"total"`
			Assigned uint64 `json:"assigned"`
		} `json:"pools"`
	}
	getJSON(t, a, ipam.PoolsPath, &stats)
	g.Expect(stats.Pools).NotTo(BeEmpty())

	dom := DumpDOM(t, a.REST+"/")
	doc, err := html.Parse(strings.NewReader(dom))
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(text(one(t, doc, byAttr("id", "node-name")))).To(Equal("browser-node"))
	g.Expect(text(cell(t, one(t, doc, byAttr("data-field", "node-id"))))).To(Equal(strconv.Itoa(int(info.NodeID))))
	g.Expect(text(cell(t, one(t, doc, byAttr("data-field", "pod-subnet"))))).To(Equal(info.PodSubnetThisNode))

	rows := all(doc, byClass("pool"))
	g.Expect(rows).To(HaveLen(len(stats.Pools)), "one bar per pool and family")
	for _, p := range stats.Pools {
		row := one(t, doc, byAttr("data-cidr", p.CIDR))
		g.Expect(attr(row, "data-used")).To(Equal("3"), p.CIDR)
		g.Expect(p.Assigned).To(Equal(uint64(3)))
		g.Expect(attr(row, "data-total")).To(Equal(strconv.FormatUint(p.Total, 10)))
		fill := one(t, row, byClass("fill"))
		g.Expect(attr(fill, "width")).To(Equal(strconv.FormatFloat(3*360/float64(p.Total), 'f', 1, 64)))
	}

	minutes := all(doc, byClass("minute"))
	g.Expect(minutes).To(HaveLen(60))
	// The ADDs were this minute, or the last one if the minute turned.
	recent := atoi(t, attr(minutes[59], "data-allocs")) + atoi(t, attr(minutes[58], "data-allocs"))
	g.Expect(recent).To(Equal(3))
	g.Expect(text(one(t, doc, byAttr("id", "allocs-hour")))).To(Equal("3"))

	errs := all(doc, byClass("cni-error"))
	g.Expect(errs).To(HaveLen(1))
	g.Expect(text(errs[0])).To(ContainSubstring("default/<script>alert(1)</script>"))
	g.Expect(all(doc, byTag("script"))).To(BeEmpty(), "the pod name is text, not a script")
	for _, section := range []string{"reservations", "cooldowns", "candidates"} {
		g.Expect(text(one(t, one(t, doc, byAttr("id", section)), byClass("none")))).To(Equal("none"), section)
	}

	var hrefs []string
	for _, l := range all(doc, byTag("a")) {
		hrefs = append(hrefs, attr(l, "href"))
	}
	g.Expect(hrefs).To(ContainElements(ipam.IPAMPath, ipam.PoolsPath, "/readiness", "/metrics"))

	shot := filepath.Join(t.ArtifactDir(), "agent-status.png")
	Screenshot(t, a.REST+"/", shot, 1200, 900)
	checkPNG(t, shot, 1200, 900)
	if dir := os.Getenv(ScreenshotDirEnv); dir != "" {
		g.Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
		out := filepath.Join(dir, "agent-status.png")
		Screenshot(t, a.REST+"/", out, 1200, 900)
		checkPNG(t, out, 1200, 900)
		t.Logf("screenshot written to %s", out)
	}
}

func checkPNG(t *testing.T, file string, w, h int) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	cfg, err := png.DecodeConfig(f)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if cfg.Width != w || cfg.Height != h {
		t.Fatalf("%s is %dx%d, want %dx%d", file, cfg.Width, cfg.Height, w, h)
	}
}

func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// addRequest is a CNI ADD of container c for pod default/<pod>.
func addRequest(c, pod string) *cni.CNIRequest {
	return &cni.CNIRequest{
		Version: "1.1.0", ContainerId: c, NetworkNamespace: "/var/run/netns/" + c, InterfaceName: "eth0",
		NetworkName:    "k8s-pod-network",
		ExtraNwConfig:  `{"cniVersion":"1.1.0","name":"k8s-pod-network","type":"contiv-cni"}`,
		ExtraArguments: "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=" + pod + ";K8S_POD_INFRA_CONTAINER_ID=" + c,
	}
}

func getJSON(t *testing.T, a *testenv.Agent, path string, out any) {
	t.Helper()
	status, body := a.Get(t, path)
	if status != 200 {
		t.Fatalf("GET %s: %d %s", path, status, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// DOM helpers (htmlq's, under the names these tests use).

var (
	all     = htmlq.Find
	attr    = htmlq.Attr
	byAttr  = htmlq.ByAttr
	byClass = htmlq.ByClass
	byTag   = htmlq.ByTag
	text    = htmlq.Text
)

func one(t *testing.T, n *html.Node, pred func(*html.Node) bool) *html.Node {
	t.Helper()
	return htmlq.One(t, n, pred)
}

// cell is the first td of a row.
func cell(t *testing.T, row *html.Node) *html.Node {
	t.Helper()
	return all(row, byTag("td"))[0]
}
