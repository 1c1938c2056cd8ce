package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcdServing is the etcd server's log message that carries the address
// it serves clients on (port 0 is resolved by then).
const etcdServing = "serving client traffic insecurely; this is strongly discouraged!"

// Etcd is the Contiv etcd: a single-member etcd server process on
// loopback ports the kernel chooses.
type Etcd struct {
	*Proc
	// Endpoint is its client address, "127.0.0.1:port".
	Endpoint string
}

// startEtcd runs the etcd binary bin with its data and log in dir and
// waits until it answers.
func startEtcd(ctx context.Context, bin, dir string) (*Etcd, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	const port0 = "http://127.0.0.1:0"
	p, err := startProc(procSpec{name: "etcd", bin: bin, dir: dir, env: os.Environ(),
		args: []string{"--name", "contiv", "--data-dir", filepath.Join(dir, "data"),
			"--listen-client-urls", port0, "--advertise-client-urls", port0,
			"--listen-peer-urls", port0, "--initial-advertise-peer-urls", port0,
			"--initial-cluster", "contiv=" + port0, "--enable-grpc-gateway=false"},
		ready: func(rec map[string]any) (string, bool) {
			addr, _ := rec["address"].(string)
			return addr, rec["msg"] == etcdServing && addr != ""
		}})
	if err != nil {
		return nil, err
	}
	e := &Etcd{Proc: p}
	if e.Endpoint, err = p.waitReady(ctx, startTimeout); err == nil {
		err = e.ping(ctx)
	}
	if err != nil {
		return nil, joinKill(err, p)
	}
	return e, nil
}

// ping reads one key: etcd answers clients.
func (e *Etcd) ping(ctx context.Context) error {
	cli, err := e.Client()
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cli.Get(ctx, "/"); err != nil {
		return fmt.Errorf("etcd at %s does not answer: %w", e.Endpoint, err)
	}
	return nil
}

// Client returns a new client of the etcd; the caller closes it.
func (e *Etcd) Client() (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint}, DialTimeout: 5 * time.Second,
		Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("etcd client of %s: %w", e.Endpoint, err)
	}
	return cli, nil
}
