package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/contiv-ipam/agent/plugins/ksr/model/agentstatus"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	"github.com/contiv-ipam/agent/plugins/ksr/model/node"
	"github.com/contiv-ipam/agent/plugins/ksr/model/poolblock"
	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
)

// The etcd side of contiv-netctl: the cluster's records, read with one
// transaction of prefix reads (one round trip, one revision), and the
// remaining TTL of each presence lease.

// The prefixes read (full keys).
var (
	idPrefix       = codec.KSRPrefix + vppnode.KeyPrefix
	nodePrefix     = codec.KSRPrefix + node.KeyPrefix
	grantPrefix    = codec.KSRPrefix + poolblock.GrantPrefix
	presencePrefix = vppnode.PresencePrefix
	statusPrefix   = agentstatus.Prefix
)

// leaseLimit bounds the LeaseTimeToLive calls in flight, as agentLimit
// does the agents' calls.
const leaseLimit = 16

// etcdConn is a client of the cluster's etcd and what -etcd said.
type etcdConn struct {
	cli       *clientv3.Client
	endpoints []string
	from      string        // "-etcd", "env ...", "the default"
	timeout   time.Duration // -timeout: bound of each read
}

// newEtcd checks the etcd flags and builds the client (it does not dial
// yet: a request does). A bad endpoint or flag combination is a
// usageError; a certificate file that cannot be read is an error naming
// it.
func newEtcd(g *globals, usage func(io.Writer)) (*etcdConn, error) {
	bad := func(format string, args ...any) error {
		return &usageError{msg: fmt.Sprintf(format, args...), usage: usage}
	}
	if g.timeout <= 0 {
		return nil, bad("-timeout %s: want a positive duration such as 30s", g.timeout)
	}
	if (g.etcdCert == "") != (g.etcdKey == "") {
		return nil, bad("-etcd-cert and -etcd-key go together: give both or neither")
	}
	tlsFlags := g.etcdCACert != "" || g.etcdCert != ""
	var eps []string
	anyHTTPS := false
	for _, ep := range strings.Split(g.etcd, ",") {
		ep = strings.TrimSpace(ep)
		if ep == "" {
			continue
		}
		if strings.Contains(ep, "://") {
			u, err := url.Parse(ep)
			switch {
			case err != nil:
				return nil, bad("%s %q: endpoint %q is not a URL: want http://host:port, https://host:port or host:port", g.etcdFrom, g.etcd, ep)
			case u.Scheme != "http" && u.Scheme != "https":
				return nil, bad("%s %q: endpoint %q: want http://host:port, https://host:port or host:port", g.etcdFrom, g.etcd, ep)
			case u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil:
				return nil, bad("%s %q: endpoint %q: want scheme://host:port and nothing else", g.etcdFrom, g.etcd, ep)
			case u.Scheme == "http" && tlsFlags:
				return nil, bad("-etcd-cacert, -etcd-cert and -etcd-key are for an https:// etcd; %s has %q", g.etcdFrom, ep)
			}
			anyHTTPS = anyHTTPS || u.Scheme == "https"
			ep = u.Scheme + "://" + u.Host
		} else if _, _, err := net.SplitHostPort(ep); err != nil {
			return nil, bad("%s %q: endpoint %q: want http://host:port, https://host:port or host:port", g.etcdFrom, g.etcd, ep)
		}
		eps = append(eps, ep)
	}
	if len(eps) == 0 {
		return nil, bad("%s %q: no etcd endpoint", g.etcdFrom, g.etcd)
	}
	cfg := clientv3.Config{Endpoints: eps, DialTimeout: g.timeout, Logger: zap.NewNop()}
	if anyHTTPS || tlsFlags {
		tc, err := etcdTLS(g)
		if err != nil {
			return nil, err
		}
		cfg.TLS = tc
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd %s (%s): %w", strings.Join(eps, ","), g.etcdFrom, err)
	}
	return &etcdConn{cli: cli, endpoints: eps, from: g.etcdFrom, timeout: g.timeout}, nil
}

// etcdTLS is the TLS configuration of -etcd-cacert, -etcd-cert and
// -etcd-key.
func etcdTLS(g *globals) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if g.etcdCACert != "" {
		pem, err := os.ReadFile(g.etcdCACert)
		if err != nil {
			return nil, fmt.Errorf("-etcd-cacert: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-etcd-cacert %s: no PEM certificate in the file", g.etcdCACert)
		}
		tc.RootCAs = pool
	}
	if g.etcdCert != "" {
		cert, err := tls.LoadX509KeyPair(g.etcdCert, g.etcdKey)
		if err != nil {
			return nil, fmt.Errorf("-etcd-cert %s, -etcd-key %s: %w", g.etcdCert, g.etcdKey, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// close closes the client.
func (e *etcdConn) close() { _ = e.cli.Close() }

// fail is err of a read of etcd as the commands report it: which etcd,
// where it came from, and a hint when it did not answer.
func (e *etcdConn) fail(ctx context.Context, what string, err error) error {
	where := fmt.Sprintf("etcd %s (%s)", strings.Join(e.endpoints, ","), e.from)
	switch {
	case ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("%s: %s: interrupted", where, what)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s: %s: no reply within -timeout %s (is it running? -etcd, %s or %s name it)",
			where, what, e.timeout, envEtcd, envEtcdctl)
	}
	return fmt.Errorf("%s: %s: %w", where, what, err)
}

// snapshot is what contiv-netctl reads of the cluster from etcd, all of
// one revision.
type snapshot struct {
	revision int64
	ids      []*mvccpb.KeyValue // node-ID records (vppnode)
	nodes    []*mvccpb.KeyValue // Kubernetes Nodes
	grants   []*mvccpb.KeyValue // elastic pool grants
	presence []*mvccpb.KeyValue // agents' presence keys (each on a lease)
	status   []*mvccpb.KeyValue // agents' status records
	// ttl is the remaining TTL in seconds of each presence lease (-1:
	// expired, being revoked); a lease missing from it was not asked.
	ttl map[clientv3.LeaseID]int64
}

// readPrefixes reads the prefixes into the snapshot's slices with one
// transaction (one round trip, one revision), bounded by -timeout.
func (e *etcdConn) readPrefixes(ctx context.Context, prefixes map[string]*[]*mvccpb.KeyValue) (*snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	order := make([]string, 0, len(prefixes))
	ops := make([]clientv3.Op, 0, len(prefixes))
	for p := range prefixes {
		order = append(order, p)
	}
	for _, p := range order {
		ops = append(ops, clientv3.OpGet(p, clientv3.WithPrefix()))
	}
	resp, err := e.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, e.fail(ctx, "reading "+strings.Join(order, ", "), err)
	}
	for i, r := range resp.Responses {
		*prefixes[order[i]] = r.GetResponseRange().Kvs
	}
	return &snapshot{revision: resp.Header.Revision}, nil
}

// readCluster reads every prefix of the nodes view, then the remaining
// TTL of each presence lease (at most leaseLimit calls at once).
func (e *etcdConn) readCluster(ctx context.Context) (*snapshot, error) {
	var s snapshot
	got, err := e.readPrefixes(ctx, map[string]*[]*mvccpb.KeyValue{
		idPrefix: &s.ids, nodePrefix: &s.nodes, grantPrefix: &s.grants, presencePrefix: &s.presence, statusPrefix: &s.status})
	if err != nil {
		return nil, err
	}
	s.revision = got.revision
	s.ttl, err = e.leaseTTLs(ctx, s.presence)
	if err != nil {
		return nil, err
	}
	return &s, nil
}

// readAgents reads the presence keys and status records only (what pods
// and ipam NODE need).
func (e *etcdConn) readAgents(ctx context.Context) (*snapshot, error) {
	var s snapshot
	got, err := e.readPrefixes(ctx, map[string]*[]*mvccpb.KeyValue{presencePrefix: &s.presence, statusPrefix: &s.status})
	if err != nil {
		return nil, err
	}
	s.revision = got.revision
	return &s, nil
}

// leaseTTLs asks the remaining TTL of the lease of each key, concurrently
// (at most leaseLimit at once), within one -timeout.
func (e *etcdConn) leaseTTLs(ctx context.Context, kvs []*mvccpb.KeyValue) (map[clientv3.LeaseID]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	out := map[clientv3.LeaseID]int64{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var firstErr error
	sem := make(chan struct{}, leaseLimit)
	for _, kv := range kvs {
		id := clientv3.LeaseID(kv.Lease)
		if id == clientv3.NoLease {
			continue
		}
		mu.Lock()
		_, asked := out[id]
		out[id] = -1
		mu.Unlock()
		if asked {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r, err := e.cli.TimeToLive(ctx, id)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			out[id] = r.TTL
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, e.fail(ctx, "reading the presence leases", firstErr)
	}
	return out, nil
}
