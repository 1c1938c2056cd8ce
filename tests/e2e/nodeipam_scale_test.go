package e2e

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/contiv-ipam/agent/plugins/ksr"
	"github.com/contiv-ipam/agent/tests/cluster"
	"github.com/contiv-ipam/agent/tests/kubeenv"
)

// EnvScaleNodes is the number of Nodes TestNodeIPAMScale creates; `make
// bench-nodeipam-scale` sets it to 5000.
const EnvScaleNodes = "NODEIPAM_SCALE_NODES"

// EnvScaleQPS, when set, is contiv-ksr's kubeQPS (kubeBurst twice that)
// for TestNodeIPAMScale; unset, ksr.conf's default (50).
const EnvScaleQPS = "NODEIPAM_SCALE_QPS"

// defaultScaleNodes keeps the scenario short in `make test`: contiv-ksr
// patches each Node once, at kubeQPS (50 a second by default), so N Nodes
// take about N/50 s.
const defaultScaleNodes = 200

// scaleCreators are the test's clients that create the Nodes at once.
const scaleCreators = 16

// One contiv-ksr gives a pod CIDR to each of many Nodes created at once.
// Figures: the time from the first create until every Node holds a pod
// CIDR (seen through a watch), the API writes contiv-ksr made per Node,
// and contiv-ksr's peak resident memory.
func TestNodeIPAMScale(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := t.Context()
	n := defaultScaleNodes
	if s := os.Getenv(EnvScaleNodes); s != "" {
		var err error
		n, err = strconv.Atoi(s)
		g.Expect(err).NotTo(HaveOccurred(), EnvScaleNodes)
		g.Expect(n).To(BeNumerically(">", 0), EnvScaleNodes)
	}
	kube := kubeenv.StartT(t)
	c := cluster.StartT(t, cluster.TestBins(t), kube.Kubeconfig)
	const cluster4 = "10.0.0.0/8"
	conf := ipamKSR(cluster4)
	if s := os.Getenv(EnvScaleQPS); s != "" {
		qps, err := strconv.Atoi(s)
		g.Expect(err).NotTo(HaveOccurred(), EnvScaleQPS)
		conf.KubeQPS = qps
	}
	k := c.AddKSRT(t, conf)
	cli := c.ClientT(t)
	g.Eventually(ipamState(ctx, k)).WithTimeout(15*time.Second).Should(HaveField("Running", BeTrue()),
		"the allocator runs before the first Node is created")

	fast := fastClient(g, kube)
	list, err := fast.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list.Items).To(BeEmpty())
	w, err := fast.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()
	before, err := apiWrites(ctx, kube.Client)
	g.Expect(err).NotTo(HaveOccurred())

	names := nodeNames("scale", n)
	start := time.Now()
	created := make(chan error, 1)
	go func() { created <- createNodes(ctx, fast, names, scaleCreators) }()
	// N/50 s at contiv-ksr's default rate limit, with room to spare.
	seen, err := watchUntilAllHaveCIDRs(w.ResultChan(), n, 2*time.Minute+time.Duration(n)*100*time.Millisecond)
	total := time.Since(start)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(<-created).To(Succeed())

	cidrs, err := allPodCIDRs(ctx, kube.Client)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cidrs).To(HaveLen(n))
	expectDistinctInside(g, cidrs, names, cluster4)
	g.Eventually(func() ([]string, error) { return claims(ctx, cli) }).WithTimeout(30*time.Second).
		Should(BeEmpty(), "claims left in etcd")
	g.Eventually(usedIn(ctx, k)).WithTimeout(10*time.Second).Should(BeEquivalentTo(n), "blocks used")

	after, err := apiWrites(ctx, kube.Client)
	g.Expect(err).NotTo(HaveOccurred())
	delta := after.minus(before)
	g.Expect(delta["POST nodes"]).To(BeEquivalentTo(n), "Node creates: the test's own, none by contiv-ksr")
	delete(delta, "POST nodes")
	rss, err := peakRSS(k.PID())
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("nodeipam-scale: nodes=%d kubeQPS=%d total=%.2fs per-node-writes=%.3f ksr-peak-rss=%.1fMiB",
		n, cmp.Or(conf.KubeQPS, ksr.DefaultKubeQPS), total.Seconds(), float64(delta.sum())/float64(n), float64(rss)/(1<<20))
	t.Logf("nodeipam-scale: contiv-ksr's API writes %v; Node changes after their create seen by the watch: %.3f per node",
		delta, float64(seen.modified)/float64(n))
}

// watched is what the watch saw until every Node held CIDRs.
type watched struct {
	modified int // MODIFIED events: writes that changed a Node
}

// watchUntilAllHaveCIDRs reads Node events until n Nodes hold pod CIDRs;
// an error when the watch ends or timeout passes first.
func watchUntilAllHaveCIDRs(events <-chan watch.Event, n int, timeout time.Duration) (watched, error) {
	var seen watched
	have := map[string]bool{}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for len(have) < n {
		select {
		case ev, ok := <-events:
			if !ok {
				return seen, fmt.Errorf("the watch ended with %d of %d Nodes holding CIDRs", len(have), n)
			}
			node, isNode := ev.Object.(*corev1.Node)
			if !isNode {
				return seen, fmt.Errorf("watch event %s of %T", ev.Type, ev.Object)
			}
			if ev.Type == watch.Modified {
				seen.modified++
			}
			if len(node.Spec.PodCIDRs) > 0 {
				have[node.Name] = true
			}
		case <-deadline.C:
			return seen, fmt.Errorf("%d of %d Nodes held CIDRs after %s", len(have), n, timeout)
		}
	}
	return seen, nil
}

// writes counts the API server's requests that write Nodes or Events, by
// "VERB resource[/subresource]".
type writes map[string]float64

func (w writes) minus(o writes) writes {
	out := writes{}
	for k, v := range w {
		if d := v - o[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

func (w writes) sum() float64 {
	var s float64
	for _, v := range w {
		s += v
	}
	return s
}

// requestLine is one series of apiserver_request_total.
var requestLine = regexp.MustCompile(`^apiserver_request_total\{(.*)\} (\S+)$`)

// labelPair is one label of a series.
var labelPair = regexp.MustCompile(`(\w+)="([^"]*)"`)

// apiWrites reads the kube-apiserver's /metrics: apiserver_request_total
// of every verb that writes (not GET, LIST, WATCH) on nodes and events.
// The counter does not name the client, so it is honest only because
// nothing else writes these resources here: the test creates the Nodes
// (POST nodes, counted and subtracted by the caller), no kubelet or
// controller-manager runs, and contiv-ksr's only API writes are its node
// allocator's (patches of spec and status, Events); its mirror writes to
// etcd.
func apiWrites(ctx context.Context, client kubernetes.Interface) (writes, error) {
	body, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver /metrics: %w", err)
	}
	out := writes{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		m := requestLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		labels := map[string]string{}
		for _, p := range labelPair.FindAllStringSubmatch(m[1], -1) {
			labels[p[1]] = p[2]
		}
		verb, resource := labels["verb"], labels["resource"]
		if (resource != "nodes" && resource != "events") || verb == "GET" || verb == "LIST" || verb == "WATCH" {
			continue
		}
		if labels["subresource"] != "" {
			resource += "/" + labels["subresource"]
		}
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			return nil, fmt.Errorf("kube-apiserver /metrics: %q: %w", sc.Text(), err)
		}
		out[verb+" "+resource] += v
	}
	return out, sc.Err()
}

// peakRSS is VmHWM of process pid, in bytes.
func peakRSS(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no VmHWM", pid)
}
