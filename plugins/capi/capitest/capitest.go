// Package capitest runs the API server of the provider's tests as a
// Cluster API management cluster of one of three shapes (Served): the
// ipam.cluster.x-k8s.io CRDs serve v1beta2 only; v1beta1 and v1beta2
// (storage v1beta2) converted by a webhook; or v1beta1 only, with a
// v1beta1 Cluster CRD too (a Cluster API before v1.11).
//
// Cluster API's controller manager serves the conversion of its CRDs in
// a real cluster. Here the test process stands in for it: Webhook
// converts with Cluster API's own conversion functions, served over TLS
// on loopback with the certificates envtest generates
// (envtest.WebhookInstallOptions), and the CRDs' conversion stanza points
// at it.
//
// Caller duties: run `make kube-bins` first (see tests/kubeenv); the
// Env's API server, webhook and certificates live until the test ends.
package capitest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/contiv-ipam/agent/plugins/capi/ipamutil"
	"github.com/contiv-ipam/agent/tests/kubeenv"
)

// Served is the shape of the Cluster API CRDs of a management cluster.
type Served int

const (
	// ServedV1Beta2: ipam.cluster.x-k8s.io and cluster.x-k8s.io at
	// v1beta2 only (plugins/capi/api/crd/capi).
	ServedV1Beta2 Served = iota
	// ServedBoth: IPAddressClaim and IPAddress at v1beta1 and v1beta2,
	// storage v1beta2, with the conversion webhook (.../capi/conversion);
	// Cluster at v1beta2.
	ServedBoth
	// ServedV1Beta1: IPAddressClaim, IPAddress and Cluster at v1beta1
	// only (.../capi/v1beta1).
	ServedV1Beta1
)

// AllServed lists the shapes, for a loop over them.
var AllServed = []Served{ServedV1Beta2, ServedBoth, ServedV1Beta1}

func (s Served) String() string {
	switch s {
	case ServedV1Beta2:
		return "v1beta2"
	case ServedBoth:
		return "v1beta1+v1beta2"
	case ServedV1Beta1:
		return "v1beta1"
	}
	return "Served(" + strconv.Itoa(int(s)) + ")"
}

// Versions are the versions ipamutil.DiscoverVersions picks for s.
func (s Served) Versions() ipamutil.Versions {
	if s == ServedV1Beta1 {
		return ipamutil.Versions{IPAM: ipamutil.V1Beta1, Cluster: ipamutil.V1Beta1}
	}
	return ipamutil.Versions{IPAM: ipamutil.V1Beta2, Cluster: ipamutil.V1Beta2}
}

// CRD directories and files, relative to the repository root.
const (
	poolCRDs       = "plugins/capi/api/crd"
	capiCRDs       = "plugins/capi/api/crd/capi"
	conversionCRDs = "plugins/capi/api/crd/capi/conversion"
	v1beta1CRDs    = "plugins/capi/api/crd/capi/v1beta1"
	clusterCRD     = "plugins/capi/api/crd/capi/cluster.x-k8s.io_clusters.yaml"
)

// Env is a running API server of one shape.
type Env struct {
	*kubeenv.Env
	Served Served
	// Webhook is the conversion webhook; nil unless the shape (or
	// Upgrade) needs it.
	Webhook *Webhook
}

// Start runs the API server with the pool CRDs and the Cluster API CRDs
// of s (and, for ServedBoth, the conversion webhook) until t ends.
func Start(t testing.TB, s Served) *Env {
	t.Helper()
	var dirs []string
	switch s {
	case ServedV1Beta2:
		dirs = []string{poolCRDs, capiCRDs}
	case ServedBoth:
		dirs = []string{poolCRDs, clusterCRD}
	case ServedV1Beta1:
		dirs = []string{poolCRDs, v1beta1CRDs}
	default:
		t.Fatalf("capitest: unknown shape %v", s)
	}
	e := &Env{Env: kubeenv.StartT(t, kubeenv.WithCRDs(dirs...)), Served: s}
	if s == ServedBoth {
		e.installConversion(t)
	}
	return e
}

// Upgrade turns the IPAddressClaim and IPAddress CRDs of a ServedV1Beta1
// Env into those of ServedBoth (v1beta2 added as the storage version,
// with the conversion webhook), as a Cluster API upgrade does; the
// Cluster CRD stays at v1beta1. Objects stored at v1beta1 stay readable
// at both versions.
func (e *Env) Upgrade(t testing.TB) {
	t.Helper()
	if e.Served != ServedV1Beta1 {
		t.Fatalf("capitest: Upgrade of a %v Env", e.Served)
	}
	e.installConversion(t)
	e.Served = ServedBoth
}

// installConversion starts the webhook and creates (or replaces) the
// conversion CRDs pointing at it.
func (e *Env) installConversion(t testing.TB) {
	t.Helper()
	if e.Webhook == nil {
		w, err := StartWebhook()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := w.Close(); err != nil {
				t.Error(err)
			}
		})
		e.Webhook = w
	}
	crds, err := readCRDs(filepath.Join(kubeenv.RepoRoot(), conversionCRDs))
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range crds {
		crd.Spec.Conversion.Webhook.ClientConfig = &apiextensionsv1.WebhookClientConfig{URL: &e.Webhook.URL, CABundle: e.Webhook.CABundle}
	}
	if err := e.apply(crds); err != nil {
		t.Fatal(err)
	}
}

// apply creates or updates the CRDs and waits until their versions are
// served.
func (e *Env) apply(crds []*apiextensionsv1.CustomResourceDefinition) error {
	s, err := newCRDScheme()
	if err != nil {
		return err
	}
	c, err := client.New(e.Config, client.Options{Scheme: s})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, crd := range crds {
		var cur apiextensionsv1.CustomResourceDefinition
		err := c.Get(ctx, client.ObjectKeyFromObject(crd), &cur)
		switch {
		case err == nil:
			crd.ResourceVersion = cur.ResourceVersion
			err = c.Update(ctx, crd)
		case client.IgnoreNotFound(err) == nil:
			err = c.Create(ctx, crd)
		}
		if err != nil {
			return fmt.Errorf("capitest: CRD %s: %w", crd.Name, err)
		}
	}
	return envtest.WaitForCRDs(e.Config, crds, envtest.CRDInstallOptions{MaxTime: 30 * time.Second, PollInterval: 50 * time.Millisecond})
}

// readCRDs reads the CRDs of the YAML files in dir.
func readCRDs(dir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("capitest: no CRDs in %s (%v)", dir, err)
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(b, crd); err != nil {
			return nil, fmt.Errorf("capitest: %s: %w", f, err)
		}
		if crd.Spec.Conversion == nil || crd.Spec.Conversion.Webhook == nil {
			return nil, fmt.Errorf("capitest: %s has no conversion webhook stanza", f)
		}
		out = append(out, crd)
	}
	return out, nil
}

// serve runs srv on ln until Close; the error of Serve other than the
// close is returned by Close.
func serve(srv *http.Server, ln net.Listener) <-chan error {
	done := make(chan error, 1)
	go func() {
		err := srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		done <- err
	}()
	return done
}

// tlsConfig loads the serving certificate envtest wrote into dir.
func tlsConfig(dir string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		return nil, fmt.Errorf("capitest: webhook certificate: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

func newCRDScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("capitest: scheme: %w", err)
	}
	return s, nil
}
