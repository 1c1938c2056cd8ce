package manifests

import (
	"context"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/logging/logtest"
	"github.com/contiv-ipam/agent/tests/kubeenv"
)

// syncBuffer is a buffer the process writes while a failing assertion
// reads it.
type syncBuffer = logtest.Buffer

// freePort returns a loopback port nothing listens on (now).
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// The etcd release the tests use starts with the StatefulSet's own
// environment (node IP 127.0.0.1, the data volume in a temporary
// directory, the two ports moved to free ones) and answers both probes on
// its client port.
func TestEtcdRunsWithTheManifestEnv(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	b := render(t)
	sts := b.etcd()
	g.Expect(sts).NotTo(BeNil())
	ctr := &sts.Spec.Template.Spec.Containers[0]
	env := containerEnvWith(b, ctr, map[string]string{"status.podIP": "127.0.0.1", "spec.nodeName": "node-a"})
	client, peer := freePort(t), freePort(t)
	data := t.TempDir()
	var cmdEnv []string
	for k, v := range env {
		if !strings.HasPrefix(k, "ETCD_") {
			continue
		}
		v = strings.ReplaceAll(v, ":"+strconv.Itoa(namedPort(ctr, "client")), ":"+client)
		v = strings.ReplaceAll(v, ":"+strconv.Itoa(namedPort(ctr, "peer")), ":"+peer)
		v = strings.Replace(v, ctr.VolumeMounts[0].MountPath, data, 1)
		cmdEnv = append(cmdEnv, k+"="+v)
	}
	g.Expect(filepath.Dir(env["ETCD_DATA_DIR"])).To(Equal(ctr.VolumeMounts[0].MountPath), "ETCD_DATA_DIR on the data volume")

	assets, err := kubeenv.AssetsDir()
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(t.Context())
	cmd := exec.CommandContext(ctx, filepath.Join(assets, "etcd"))
	cmd.Env = cmdEnv
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	g.Expect(cmd.Start()).To(Succeed())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { cancel(); <-exited })

	for _, path := range []string{ctr.ReadinessProbe.HTTPGet.Path, ctr.LivenessProbe.HTTPGet.Path} {
		url := "http://127.0.0.1:" + client + path
		g.Eventually(func() (int, error) {
			select {
			case <-exited:
				return 0, StopTrying("etcd exited")
			default:
			}
			resp, err := http.Get(url)
			if err != nil {
				return 0, err
			}
			_ = resp.Body.Close()
			return resp.StatusCode, nil
		}, 20*time.Second, 100*time.Millisecond).Should(Equal(http.StatusOK), func() string { return "GET " + url + "\n" + out.String() })
	}
}
