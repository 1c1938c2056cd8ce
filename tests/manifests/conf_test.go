package manifests

import (
	"fmt"
	"slices"
	"sort"
	"testing"

	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/health"
	"github.com/contiv-ipam/agent/infra/kvdb/bolt"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd"
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

// normalizer is a config with environment rules (etcd.conf:
// ETCD_ENDPOINTS); the plugin calls Normalize before Validate.
type normalizer interface {
	Normalize(func(string) (string, bool))
}

// loaders give each <plugin>.conf its plugin's Config at its defaults, as
// the plugin decodes it. http.conf starts from the component's default
// endpoint (contiv-ksr moves it to ksr.DefaultEndpoint).
var loaders = map[string]func(c component) validator{
	"http.conf": func(c component) validator {
		x := rest.DefaultConfig()
		x.Endpoint = c.defaultEndpoint
		return &x
	},
	"etcd.conf":       func(component) validator { x := etcd.DefaultConfig(); return &x },
	"bolt.conf":       func(component) validator { x := bolt.DefaultConfig(); return &x },
	"health.conf":     func(component) validator { x := health.DefaultConfig(); return &x },
	"logmanager.conf": func(component) validator { x := logmanager.DefaultConfig(); return &x },
	"metrics.conf":    func(component) validator { x := metrics.DefaultConfig(); return &x },
	"controller.conf": func(component) validator { x := controller.DefaultConfig(); return &x },
	"contiv.conf":     func(component) validator { x := contivconf.DefaultConfig(); return &x },
	"ipam.conf":       func(component) validator { x := ipam.DefaultConfig(); return &x },
	"podmanager.conf": func(component) validator { x := podmanager.DefaultConfig(); return &x },
	"ksr.conf":        func(component) validator { x := ksr.DefaultConfig(); return &x },
}

// loadConf returns the component's <file> as its plugin sees it: decoded
// strictly from the ConfigMap over the defaults (the defaults alone when
// the ConfigMap has no such file), normalised with env, validated. source
// names the file in errors.
func loadConf(c component, files map[string]string, file string, env map[string]string) (validator, error) {
	newConf, ok := loaders[file]
	if !ok {
		return nil, fmt.Errorf("%s: no plugin Config type is known for %s", c.at("ConfigMap"), file)
	}
	conf := newConf(c)
	source := fmt.Sprintf("%s ConfigMap key %s", c.name, file)
	if data, ok := files[file]; ok {
		if err := config.Decode([]byte(data), conf, source); err != nil {
			return nil, err
		}
	}
	if n, ok := conf.(normalizer); ok {
		n.Normalize(lookupIn(env))
	}
	if err := conf.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return conf, nil
}

// loadTyped is loadConf for a known Config type.
func loadTyped[T any](b *bundle, c component, file string) (*T, error) {
	files, err := configFiles(b, c)
	if err != nil {
		return nil, err
	}
	v, err := loadConf(c, files, file, containerEnv(b, c.main))
	if err != nil {
		return nil, err
	}
	x, ok := any(v).(*T)
	if !ok {
		return nil, fmt.Errorf("%s decodes into %T, not %T", file, v, x)
	}
	return x, nil
}

// checkConfigFiles: every file of the component's ConfigMap is one its
// binary reads (a -<plugin>-config flag), and decodes strictly and
// validates with that plugin's Config.
func checkConfigFiles(t *testing.T, b *bundle) []error {
	cs, err := components(b)
	if err != nil {
		return []error{err}
	}
	var errs []error
	for _, c := range cs {
		files, err := configFiles(b, c)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		reads := binaryConfFiles(t, c.name)
		for _, name := range sortedKeys(files) {
			if !slices.Contains(reads, name) {
				errs = append(errs, fmt.Errorf("%s: key %q is no file %s reads (it reads %v)", c.at("ConfigMap"), name, c.name, reads))
				continue
			}
			if _, err := loadConf(c, files, name, containerEnv(b, c.main)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errs
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
