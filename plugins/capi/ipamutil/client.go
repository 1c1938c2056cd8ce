package ipamutil

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NewClient returns c speaking v: it takes and returns the v1beta2 Go
// types of IPAddressClaim, IPAddress and Cluster (and their lists) and
// talks to c (the API server or the manager's cache) at the versions of
// v, converting on the way in and out. Other objects pass through. At
// v1beta2 (the zero Versions) it returns c itself.
//
// c's Scheme must know the served types (v1beta1 ones too, when served).
// A Patch of a converted type must come from MergeFrom: the merge patch
// is computed between the two converted objects, since the versions
// differ in shape (status conditions, the IPAddress prefix).
func NewClient(c client.Client, v Versions) client.Client {
	if v.normal() == (Versions{}).normal() {
		return c
	}
	return &versionedClient{Client: c, v: v}
}

// NewReader is NewClient for a reader (the manager's APIReader).
func NewReader(r client.Reader, v Versions) client.Reader {
	if v.normal() == (Versions{}).normal() {
		return r
	}
	return versionedReader{r: r, v: v}
}

// MergeFrom is client.MergeFromWithOptions(before, opts...), which a
// client of NewClient can also compute at a served version of another
// shape.
func MergeFrom(before client.Object, opts ...client.MergeFromOption) client.Patch {
	return &mergePatch{Patch: client.MergeFromWithOptions(before, opts...), before: before, opts: opts}
}

type mergePatch struct {
	client.Patch
	before client.Object
	opts   []client.MergeFromOption
}

// toWire converts obj into a fresh object of the served version; ok is
// false when obj passes as it is.
func (v Versions) toWire(obj runtime.Object) (wire runtime.Object, ok bool, err error) {
	w, ok := v.wireOf(obj)
	if !ok {
		return obj, false, nil
	}
	if err := convert(obj, w); err != nil {
		return nil, true, err
	}
	return w, true, nil
}

// patchFor returns the patch of obj's wire form.
func (v Versions) patchFor(obj client.Object, p client.Patch) (client.Patch, error) {
	mp, ok := p.(*mergePatch)
	if !ok {
		return nil, fmt.Errorf("ipamutil: patch %T at %s: %T cannot be converted; make it with ipamutil.MergeFrom", obj, v, p)
	}
	before, _, err := v.toWire(mp.before)
	if err != nil {
		return nil, err
	}
	return client.MergeFromWithOptions(before.(client.Object), mp.opts...), nil
}

type versionedReader struct {
	r client.Reader
	v Versions
}

func (r versionedReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return get(ctx, r.r, r.v, key, obj, opts...)
}

func (r versionedReader) List(ctx context.Context, l client.ObjectList, opts ...client.ListOption) error {
	return list(ctx, r.r, r.v, l, opts...)
}

func get(ctx context.Context, r client.Reader, v Versions, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	w, ok := v.wireOf(obj)
	if !ok {
		return r.Get(ctx, key, obj, opts...)
	}
	if err := r.Get(ctx, key, w.(client.Object), opts...); err != nil {
		return err
	}
	return convert(w, obj)
}

func list(ctx context.Context, r client.Reader, v Versions, l client.ObjectList, opts ...client.ListOption) error {
	w, ok := v.wireOf(l)
	if !ok {
		return r.List(ctx, l, opts...)
	}
	if err := r.List(ctx, w.(client.ObjectList), opts...); err != nil {
		return err
	}
	return convert(w, l)
}

// versionedClient is NewClient's client.
type versionedClient struct {
	client.Client
	v Versions
}

func (c *versionedClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return get(ctx, c.Client, c.v, key, obj, opts...)
}

func (c *versionedClient) List(ctx context.Context, l client.ObjectList, opts ...client.ListOption) error {
	return list(ctx, c.Client, c.v, l, opts...)
}

// write sends obj's wire form through do and converts the answer back
// into obj.
func (v Versions) write(obj client.Object, do func(client.Object) error) error {
	w, ok, err := v.toWire(obj)
	if err != nil {
		return err
	}
	if !ok {
		return do(obj)
	}
	if err := do(w.(client.Object)); err != nil {
		return err
	}
	return convert(w, obj)
}

func (c *versionedClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return c.v.write(obj, func(o client.Object) error { return c.Client.Create(ctx, o, opts...) })
}

func (c *versionedClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return c.v.write(obj, func(o client.Object) error { return c.Client.Update(ctx, o, opts...) })
}

func (c *versionedClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	w, _, err := c.v.toWire(obj)
	if err != nil {
		return err
	}
	return c.Client.Delete(ctx, w.(client.Object), opts...)
}

func (c *versionedClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	w, _, err := c.v.toWire(obj)
	if err != nil {
		return err
	}
	return c.Client.DeleteAllOf(ctx, w.(client.Object), opts...)
}

func (c *versionedClient) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
	if _, ok := c.v.wireOf(obj); !ok {
		return c.Client.Patch(ctx, obj, p, opts...)
	}
	wp, err := c.v.patchFor(obj, p)
	if err != nil {
		return err
	}
	return c.v.write(obj, func(o client.Object) error { return c.Client.Patch(ctx, o, wp, opts...) })
}

func (c *versionedClient) Apply(context.Context, runtime.ApplyConfiguration, ...client.ApplyOption) error {
	return fmt.Errorf("ipamutil: server-side apply through a client at %s is not supported", c.v)
}

func (c *versionedClient) Status() client.SubResourceWriter {
	return &versionedSubResource{w: c.Client.Status(), v: c.v}
}

func (c *versionedClient) SubResource(name string) client.SubResourceClient {
	return &versionedSubResource{w: c.Client.SubResource(name), r: c.Client.SubResource(name), v: c.v}
}

func (c *versionedClient) GroupVersionKindFor(obj runtime.Object) (schema.GroupVersionKind, error) {
	if w, ok := c.v.wireOf(obj); ok {
		obj = w
	}
	return c.Client.GroupVersionKindFor(obj)
}

func (c *versionedClient) IsObjectNamespaced(obj runtime.Object) (bool, error) {
	if w, ok := c.v.wireOf(obj); ok {
		obj = w
	}
	return c.Client.IsObjectNamespaced(obj)
}

// versionedSubResource converts like versionedClient; r is nil for
// Status().
type versionedSubResource struct {
	w client.SubResourceWriter
	r client.SubResourceReader
	v Versions
}

func (s *versionedSubResource) Get(ctx context.Context, obj, sub client.Object, opts ...client.SubResourceGetOption) error {
	if s.r == nil {
		return fmt.Errorf("ipamutil: Get on a status writer")
	}
	w, _, err := s.v.toWire(obj)
	if err != nil {
		return err
	}
	return s.v.write(sub, func(o client.Object) error { return s.r.Get(ctx, w.(client.Object), o, opts...) })
}

func (s *versionedSubResource) Create(ctx context.Context, obj, sub client.Object, opts ...client.SubResourceCreateOption) error {
	w, _, err := s.v.toWire(obj)
	if err != nil {
		return err
	}
	return s.v.write(sub, func(o client.Object) error { return s.w.Create(ctx, w.(client.Object), o, opts...) })
}

func (s *versionedSubResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	return s.v.write(obj, func(o client.Object) error { return s.w.Update(ctx, o, opts...) })
}

func (s *versionedSubResource) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
	if _, ok := s.v.wireOf(obj); !ok {
		return s.w.Patch(ctx, obj, p, opts...)
	}
	wp, err := s.v.patchFor(obj, p)
	if err != nil {
		return err
	}
	return s.v.write(obj, func(o client.Object) error { return s.w.Patch(ctx, o, wp, opts...) })
}

func (s *versionedSubResource) Apply(context.Context, runtime.ApplyConfiguration, ...client.SubResourceApplyOption) error {
	return fmt.Errorf("ipamutil: server-side apply through a client at %s is not supported", s.v)
}
