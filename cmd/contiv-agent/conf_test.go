package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/health"
	"github.com/contiv-ipam/agent/infra/kvdb/bolt"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd"
	"github.com/contiv-ipam/agent/infra/logging"
	"github.com/contiv-ipam/agent/infra/logmanager"
	"github.com/contiv-ipam/agent/infra/metrics"
	"github.com/contiv-ipam/agent/infra/rest"
	"github.com/contiv-ipam/agent/plugins/contivconf"
	"github.com/contiv-ipam/agent/plugins/controller"
	"github.com/contiv-ipam/agent/plugins/ipam"
	"github.com/contiv-ipam/agent/plugins/ksr"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// validator is a plugin config that checks itself.
type validator interface{ Validate() error }

// sampleLoaders decode one <plugin>.conf strictly into the plugin's Config
// on top of its defaults, the way the plugin's Init does.
var sampleLoaders = map[string]func() validator{
	"http.conf":             func() validator { c := rest.DefaultConfig(); return &c },
	"etcd.conf":             func() validator { c := etcd.DefaultConfig(); return &c },
	"bolt.conf":             func() validator { c := bolt.DefaultConfig(); return &c },
	"health.conf":           func() validator { c := health.DefaultConfig(); return &c },
	"logmanager.conf":       func() validator { c := logmanager.DefaultConfig(); return &c },
	"metrics.conf":          func() validator { c := metrics.DefaultConfig(); return &c },
	"controller.conf":       func() validator { c := controller.DefaultConfig(); return &c },
	"contiv.conf":           func() validator { c := contivconf.DefaultConfig(); return &c },
	"contiv-dualstack.conf": func() validator { c := contivconf.DefaultConfig(); return &c },
	"ipam.conf":             func() validator { c := ipam.DefaultConfig(); return &c },
	"podmanager.conf":       func() validator { c := podmanager.DefaultConfig(); return &c },
	// contiv-ksr's own (conf/ksr/ holds its samples for a local run).
	"ksr.conf": func() validator { c := ksr.DefaultConfig(); return &c },
}

// TestShippedConfigFilesDecode checks that every .conf in the repository
// (conf/ for `make run` and the commented sample beside each plugin)
// decodes strictly and validates. A .conf with no loader fails the test, so
// a new plugin must add its sample here.
func TestShippedConfigFilesDecode(t *testing.T) {
	files := shippedConfFiles(t)
	seen := map[string]bool{}
	for _, path := range files {
		name := filepath.Base(path)
		newConf, ok := sampleLoaders[name]
		if !ok {
			t.Errorf("%s: no loader for %s in sampleLoaders", path, name)
			continue
		}
		seen[name] = true
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		conf := newConf()
		if err := config.Decode(data, conf, path); err != nil {
			t.Errorf("decode: %v", err)
			continue
		}
		if n, ok := conf.(interface {
			Normalize(func(string) (string, bool))
		}); ok {
			n.Normalize(func(string) (string, bool) { return "", false })
		}
		if err := conf.Validate(); err != nil {
			t.Errorf("%s: %v", path, err)
		}
	}
	for name := range sampleLoaders {
		if !seen[name] {
			t.Errorf("no shipped %s found", name)
		}
	}
}

// TestRunConfigDiffersWhereItMust pins the values `make run` depends on:
// the embedded etcd, a bolt file and the CNI socket under ./_data (no root
// paths).
func TestRunConfigDiffersWhereItMust(t *testing.T) {
	root := repoRoot(t)
	e := etcd.DefaultConfig()
	mustDecode(t, filepath.Join(root, "conf", "etcd.conf"), &e)
	e.Normalize(func(string) (string, bool) { return "", false })
	if !e.Embedded || !strings.HasPrefix(e.EmbeddedDataDir, "_data") {
		t.Errorf("conf/etcd.conf without ETCD_ENDPOINTS: embedded=%v embedded-data-dir=%q, want true and under _data",
			e.Embedded, e.EmbeddedDataDir)
	}
	e = etcd.DefaultConfig()
	mustDecode(t, filepath.Join(root, "conf", "etcd.conf"), &e)
	e.Normalize(func(string) (string, bool) { return "127.0.0.1:2999", true })
	if e.Embedded || len(e.Endpoints) != 1 {
		t.Errorf("conf/etcd.conf with ETCD_ENDPOINTS: embedded=%v endpoints=%q, want the external endpoint",
			e.Embedded, e.Endpoints)
	}
	b := bolt.DefaultConfig()
	mustDecode(t, filepath.Join(root, "conf", "bolt.conf"), &b)
	if !strings.HasPrefix(b.DBPath, "_data/") {
		t.Errorf("conf/bolt.conf: db-path=%q, want a file under _data/", b.DBPath)
	}
	pm := podmanager.DefaultConfig()
	mustDecode(t, filepath.Join(root, "conf", "podmanager.conf"), &pm)
	if !strings.HasPrefix(pm.SocketPath, "_data/") {
		t.Errorf("conf/podmanager.conf: socketPath=%q, want a socket under _data/", pm.SocketPath)
	}
}

func mustDecode(t *testing.T, path string, ptr any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := config.Decode(data, ptr, path); err != nil {
		t.Fatal(err)
	}
}

// shippedConfFiles lists conf/*.conf and every *.conf under infra/ and plugins/.
func shippedConfFiles(t *testing.T) []string {
	t.Helper()
	root := repoRoot(t)
	var files []string
	for _, dir := range []string{"conf", "infra", "plugins"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil {
				if os.IsNotExist(err) {
					return filepath.SkipDir
				}
				return err
			}
			if !d.IsDir() && strings.HasSuffix(path, ".conf") && !strings.Contains(path, "testdata") {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(files) == 0 {
		t.Fatal("no .conf files found")
	}
	return files
}

// repoRoot is two levels above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// configurationDoc is the configuration reference: every config file and
// key with its default.
const configurationDoc = "docs/configuration.md"

// TestConfigurationDocDocumentsEveryConfigKey checks that the configuration
// reference (docs/configuration.md, not any other page) names every key of
// every plugin config as `key`, nested keys as `parent.key` (list items as
// `parent[].key`).
func TestConfigurationDocDocumentsEveryConfigKey(t *testing.T) {
	doc := readDoc(t, configurationDoc)
	for file, newConf := range sampleLoaders {
		for _, key := range configKeys(reflect.TypeOf(newConf()).Elem(), "") {
			if !strings.Contains(doc, "`"+key+"`") {
				t.Errorf("%s does not document %s key `%s`", configurationDoc, file, key)
			}
		}
	}
}

// configKeys lists the JSON keys of a config struct, with nested structs
// and lists of structs walked (time.Duration and other non-structs are
// leaves).
func configKeys(typ reflect.Type, prefix string) []string {
	var keys []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if key == "-" || !f.IsExported() {
			continue
		}
		if key == "" {
			if f.Anonymous {
				keys = append(keys, configKeys(f.Type, prefix)...)
			}
			continue
		}
		keys = append(keys, prefix+key)
		switch ft := f.Type; {
		case ft.Kind() == reflect.Struct:
			keys = append(keys, configKeys(ft, prefix+key+".")...)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			keys = append(keys, configKeys(ft.Elem(), prefix+key+"[].")...)
		}
	}
	return keys
}

// readDoc reads one documentation page, given relative to the repository
// root (README.md, docs/rest-api.md, ...).
func readDoc(t *testing.T, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestHandlerOrder asserts the handler order declared in
// addControllerAndHandlers: contivconf, nodesync, podmanager, ipam.
func TestHandlerOrder(t *testing.T) {
	a := newContivAgent(logging.NewRegistry(), health.BuildInfo{})
	var got []string
	for _, h := range a.Controller.EventHandlers {
		got = append(got, h.String())
	}
	want := []string{"contivconf", "nodesync", "podmanager", "ipam"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("handlers %v, want %v", got, want)
	}
}

// TestNodeSyncWiring asserts what keeps a node ID unique: nodesync gets
// etcd's presence leases, bolt for the last node ID, and the metrics.
func TestNodeSyncWiring(t *testing.T) {
	a := newContivAgent(logging.NewRegistry(), health.BuildInfo{})
	d := a.NodeSync.Deps
	if d.DB != a.ETCD || d.Presence != a.ETCD {
		t.Errorf("nodesync DB %v, Presence %v: want the etcd plugin for both", d.DB, d.Presence)
	}
	if d.LocalDB != a.Bolt {
		t.Errorf("nodesync LocalDB %v, want the bolt plugin", d.LocalDB)
	}
	if d.Metrics != a.Metrics {
		t.Errorf("nodesync Metrics %v, want the metrics plugin", d.Metrics)
	}
	// The node-ID bound follows contivconf's ipamConfig, read when the
	// claim runs (the shipped conf/contiv.conf).
	if d.MaxNodeID == nil {
		t.Fatal("nodesync has no MaxNodeID: it could claim an ID the node subnets cannot serve")
	}
	if got := d.MaxNodeID(); got != 0 {
		t.Errorf("MaxNodeID before contivconf has a config: %d, want 0 (no bound yet)", got)
	}
	data, err := os.ReadFile(filepath.Join("..", "..", "conf", "contiv.conf"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := contivconf.DefaultConfig()
	if err := config.Decode(data, &cfg, "conf/contiv.conf"); err != nil {
		t.Fatal(err)
	}
	c := contivconf.NewPlugin(contivconf.UseConf(cfg), contivconf.UseDeps(func(d *contivconf.Deps) {
		d.LogRegistry = logging.NewRegistry()
		d.ServiceLabel = a.ServiceLabel
	}))
	if err := c.Init(); err != nil {
		t.Fatal(err)
	}
	a.ContivConf = c // the closure reads a.ContivConf when the claim runs
	if got, want := d.MaxNodeID(), ipam.MaxNodeID(c.GetIPAMConfig(), c.GetStaticDefaultGW()); got != want || got != 255 {
		t.Errorf("MaxNodeID %d, want ipam.MaxNodeID of the config, %d, which is 255 for the shipped config (VXLAN and interconnect /24s)", got, want)
	}
}
