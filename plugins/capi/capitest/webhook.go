//lint:file-ignore SA1019 Cluster API's v1beta1 packages and the deprecated v1beta1 conditions are what a management cluster at v1beta1 serves

package capitest

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	ipamv1beta1 "sigs.k8s.io/cluster-api/api/ipam/v1beta1"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
)

// Webhook serves CRD conversion (apiextensions.k8s.io/v1 ConversionReview)
// of IPAddressClaim and IPAddress between v1beta1 and v1beta2 with
// Cluster API's conversion functions, over TLS on 127.0.0.1.
type Webhook struct {
	// URL is the conversion endpoint, https://127.0.0.1:<port>/convert.
	URL string
	// CABundle verifies the serving certificate (the CRD's caBundle).
	CABundle []byte

	conversions atomic.Int64
	scheme      *runtime.Scheme
	srv         *http.Server
	done        <-chan error
	certs       *envtest.WebhookInstallOptions
}

// maxReview bounds a ConversionReview body (the API server sends a list
// page at most).
const maxReview = 64 << 20

// StartWebhook generates the certificates (envtest) and serves.
func StartWebhook() (*Webhook, error) {
	certs := &envtest.WebhookInstallOptions{LocalServingHost: "127.0.0.1"}
	if err := certs.PrepWithoutInstalling(); err != nil {
		return nil, fmt.Errorf("capitest: webhook certificates: %w", err)
	}
	w := &Webhook{CABundle: certs.LocalServingCAData, scheme: runtime.NewScheme(), certs: certs}
	fail := func(err error) (*Webhook, error) { return nil, errors.Join(err, certs.Cleanup()) }
	for _, add := range []func(*runtime.Scheme) error{ipamv1.AddToScheme, ipamv1beta1.AddToScheme} {
		if err := add(w.scheme); err != nil {
			return fail(err)
		}
	}
	cfg, err := tlsConfig(certs.LocalServingCertDir)
	if err != nil {
		return fail(err)
	}
	hostPort := net.JoinHostPort(certs.LocalServingHost, strconv.Itoa(certs.LocalServingPort))
	ln, err := net.Listen("tcp", hostPort)
	if err != nil {
		return fail(fmt.Errorf("capitest: webhook listen: %w", err))
	}
	mux := http.NewServeMux()
	mux.Handle("/convert", w)
	w.srv = &http.Server{Handler: mux, TLSConfig: cfg, ReadHeaderTimeout: 10 * time.Second}
	w.URL = "https://" + hostPort + "/convert"
	w.done = serve(w.srv, tls.NewListener(ln, cfg))
	return w, nil
}

// Conversions is the number of objects converted so far.
func (w *Webhook) Conversions() int64 { return w.conversions.Load() }

// Close stops serving and removes the certificates.
func (w *Webhook) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := w.srv.Shutdown(ctx)
	return errors.Join(err, <-w.done, w.certs.Cleanup())
}

// ServeHTTP answers one ConversionReview.
func (w *Webhook) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	var review apiextensionsv1.ConversionReview
	body, err := io.ReadAll(io.LimitReader(r.Body, maxReview))
	if err == nil {
		err = json.Unmarshal(body, &review)
	}
	if err != nil || review.Request == nil {
		http.Error(rw, fmt.Sprintf("not a ConversionReview: %v", err), http.StatusBadRequest)
		return
	}
	resp := &apiextensionsv1.ConversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
	for _, obj := range review.Request.Objects {
		out, err := w.convert(obj.Raw, review.Request.DesiredAPIVersion)
		if err != nil {
			resp.ConvertedObjects = nil
			resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}
			break
		}
		resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: out})
	}
	if resp.Result.Status == metav1.StatusSuccess {
		w.conversions.Add(int64(len(resp.ConvertedObjects)))
	}
	review.Request, review.Response = nil, resp
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(&review)
}

// convert converts one object (JSON) to the desired group version.
func (w *Webhook) convert(raw []byte, desired string) ([]byte, error) {
	var tm metav1.TypeMeta
	if err := json.Unmarshal(raw, &tm); err != nil {
		return nil, fmt.Errorf("object: %w", err)
	}
	from := tm.GroupVersionKind()
	to, err := schema.ParseGroupVersion(desired)
	if err != nil {
		return nil, fmt.Errorf("desiredAPIVersion %q: %w", desired, err)
	}
	in, err := w.scheme.New(from)
	if err != nil {
		return nil, fmt.Errorf("object of %v: %w", from, err)
	}
	if err := json.Unmarshal(raw, in); err != nil {
		return nil, fmt.Errorf("%v: %w", from, err)
	}
	out := in
	if from.GroupVersion() != to {
		if out, err = w.scheme.New(to.WithKind(from.Kind)); err != nil {
			return nil, fmt.Errorf("convert %v to %v: %w", from, to, err)
		}
		if err := w.scheme.Convert(in, out, nil); err != nil {
			return nil, fmt.Errorf("convert %v to %v: %w", from, to, err)
		}
	}
	out.GetObjectKind().SetGroupVersionKind(to.WithKind(from.Kind))
	return json.Marshal(out)
}
