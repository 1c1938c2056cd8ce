// Package genv1 wrote testdata/v1-pods.db, the bolt file of the v1 layout
// (records keyed by pod ID, no schema key) that the migration test starts
// on. It lives under testdata so that `go test ./...` never runs it; see
// ../README.md for the exact command and the commit it ran on.
package genv1

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/contiv-ipam/agent/infra/agent"
	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/kvdb/bolt"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/infra/servicelabel"
	"github.com/contiv-ipam/agent/plugins/contivconf"
	"github.com/contiv-ipam/agent/plugins/controller"
	"github.com/contiv-ipam/agent/plugins/ipam"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/nodesync"
)

var out = flag.String("out", "", "path of the bolt file to write (must not exist)")

// TestGenerateV1 runs the whole agent (embedded etcd, bolt, contivconf,
// nodesync, ipam, controller), allocates 20 pods in two namespaces,
// publishes them in the Kubernetes state (so that bolt mirrors it),
// releases four of them, and stops the agent.
func TestGenerateV1(t *testing.T) {
	if *out == "" {
		t.Fatal("-out is required")
	}
	srv := etcdtest.Start(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ec := etcd.DefaultConfig()
	ec.Endpoints = []string{srv.Endpoint()}
	etcdP := etcd.NewPlugin(etcd.UseConf(ec), etcd.UseEnv(func(string) (string, bool) { return "", false }),
		etcd.UseDeps(func(d *etcd.Deps) { d.Cfg, d.Log = config.NoFile, log }))
	bc := bolt.DefaultConfig()
	bc.DBPath = *out
	boltP := bolt.NewPlugin(bolt.UseConf(bc), bolt.UseDeps(func(d *bolt.Deps) { d.Cfg, d.Log = config.NoFile, log }))
	label := servicelabel.NewPlugin(servicelabel.UseLabel("node"), servicelabel.UseDeps(func(d *servicelabel.Deps) { d.Log = log }))
	cfg, err := contivconf.DecodeConfig([]byte("ipamConfig:\n  nodeInterconnectCIDR: 192.168.16.0/24\n"), "genv1 contiv.conf")
	if err != nil {
		t.Fatal(err)
	}
	loop := &controller.LoopRef{}
	conf := contivconf.NewPlugin(contivconf.UseConf(cfg), contivconf.UseDeps(func(d *contivconf.Deps) { d.Log, d.ServiceLabel = log, label }))
	ns := nodesync.NewPlugin(nodesync.UseDeps(func(d *nodesync.Deps) { d.Log, d.ServiceLabel, d.DB, d.EventLoop = log, label, etcdP, loop }))
	ip := ipam.NewPlugin(ipam.UseDeps(func(d *ipam.Deps) {
		d.Log, d.ContivConf, d.NodeSync, d.ServiceLabel, d.LocalDB = log, conf, ns, label, boltP
	}))
	ctrl := controller.NewPlugin(controller.UseLoopRef(loop), controller.UseHandlers(conf, ns, ip),
		controller.UseDeps(func(d *controller.Deps) { d.Cfg, d.Log, d.RemoteDB, d.LocalDB = config.NoFile, log, etcdP, boltP }))
	a, err := agent.NewAgent(agent.Plugins(etcdP, boltP, label, conf, ns, ip, ctrl), agent.Args(nil), agent.Logger(log))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for ip.PodSubnetThisNode() == nil {
		if time.Now().After(deadline) {
			t.Fatal("ipam not initialised")
		}
		time.Sleep(50 * time.Millisecond) // a one-off generator, not a test of timing
	}
	ctx := context.Background()
	cli := srv.Client(t)
	var ids []podmodel.ID
	for i := range 20 {
		ns := "default"
		if i%2 == 1 {
			ns = "team-a"
		}
		id := podmodel.ID{Name: fmt.Sprintf("web-%02d", i), Namespace: ns}
		addr, err := ip.AllocatePodIP(id, "", "")
		if err != nil {
			t.Fatal(err)
		}
		data, err := codec.Marshal(&podmodel.Pod{Name: id.Name, Namespace: id.Namespace, IpAddress: addr.String(), HostIpAddress: "192.168.56.101"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Put(ctx, codec.KSRPrefix+podmodel.Key(id.Name, id.Namespace), string(data)); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	for _, i := range []int{3, 4, 11, 16} {
		if err := ip.ReleasePodIP(ids[i]); err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Delete(ctx, codec.KSRPrefix+podmodel.Key(ids[i].Name, ids[i].Namespace)); err != nil {
			t.Fatal(err)
		}
	}
	// The mirror (bolt, under the controller's mirror prefix) must hold
	// the last pod put and lack the last pod deleted.
	last, gone := podmodel.Key(ids[19].Name, ids[19].Namespace), podmodel.Key(ids[16].Name, ids[16].Namespace)
	for !mirrored(ctx, boltP, last, gone) {
		if time.Now().After(deadline) {
			t.Fatal("the mirror did not catch up")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(*out); err != nil {
		t.Fatal(err)
	}
}

// mirrored tells whether the bolt mirror holds a key ending in last and
// none ending in gone.
func mirrored(ctx context.Context, db *bolt.Plugin, last, gone string) bool {
	kvs, _, err := db.List(ctx, "/contiv-agent/kube-state/")
	if err != nil {
		return false
	}
	has := false
	for _, kv := range kvs {
		if strings.HasSuffix(kv.Key, gone) {
			return false
		}
		has = has || strings.HasSuffix(kv.Key, last)
	}
	return has
}

var dump = flag.String("dump", "", "path of a bolt file to print (key = value, one a line)")

// TestDump prints every key of the -dump file: go test -run TestDump
// ./plugins/ipam/testdata/genv1 -args -dump=<file> (on a copy: opening
// the file may write to it).
func TestDump(t *testing.T) {
	if *dump == "" {
		t.Fatal("-dump is required")
	}
	bc := bolt.DefaultConfig()
	bc.DBPath = *dump
	db := bolt.NewPlugin(bolt.UseConf(bc), bolt.UseDeps(func(d *bolt.Deps) {
		d.Cfg, d.Log = config.NoFile, slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	if err := db.Init(); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	kvs, _, err := db.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range kvs {
		fmt.Printf("%s = %.80s\n", kv.Key, kv.Value)
	}
}
