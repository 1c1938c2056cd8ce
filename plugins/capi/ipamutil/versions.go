//lint:file-ignore SA1019 Cluster API's v1beta1 packages and the deprecated v1beta1 conditions are what a management cluster at v1beta1 serves

package ipamutil

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1beta1 "sigs.k8s.io/cluster-api/api/ipam/v1beta1"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
)

// The versions of the Cluster API groups the reconciler can talk.
const (
	// V1Beta2 is Cluster API v1.11 and later (storage version there).
	V1Beta2 = "v1beta2"
	// V1Beta1 is what older Cluster APIs serve (v1.10 and before), and
	// what newer ones still serve, converted, beside v1beta2.
	V1Beta1 = "v1beta1"
)

// The API groups of the Cluster API objects the reconciler reads.
const (
	IPAMGroup    = "ipam.cluster.x-k8s.io"
	ClusterGroup = "cluster.x-k8s.io"
)

// ErrNotServed: the API server serves none of the versions the reconciler
// can talk of a Cluster API group (or not the resources it needs).
var ErrNotServed = errors.New("ipamutil: Cluster API group not served at v1beta2 or v1beta1")

// Versions names the version of each Cluster API group the reconciler
// talks to the API server. Whatever they are, the reconciler, the
// handlers and the clients of NewClient and NewReader work with the
// v1beta2 Go types (the internal shape); objects of a v1beta1 group are
// converted on the way in and out with Cluster API's own conversion
// functions (sigs.k8s.io/cluster-api/api/ipam/v1beta1 and
// .../core/v1beta1). The zero value is v1beta2 for both groups.
type Versions struct {
	// IPAM is the version of ipam.cluster.x-k8s.io (IPAddressClaim,
	// IPAddress): V1Beta2 or V1Beta1; "" means V1Beta2.
	IPAM string
	// Cluster is the version of cluster.x-k8s.io (Cluster): V1Beta2 or
	// V1Beta1; "" means V1Beta2.
	Cluster string
}

func (v Versions) String() string {
	n := v.normal()
	return IPAMGroup + "/" + n.IPAM + ", " + ClusterGroup + "/" + n.Cluster
}

// normal fills the defaults.
func (v Versions) normal() Versions {
	if v.IPAM == "" {
		v.IPAM = V1Beta2
	}
	if v.Cluster == "" {
		v.Cluster = V1Beta2
	}
	return v
}

// Validate reports a version the reconciler cannot talk.
func (v Versions) Validate() error {
	n := v.normal()
	for _, gv := range [][2]string{{IPAMGroup, n.IPAM}, {ClusterGroup, n.Cluster}} {
		if gv[1] != V1Beta2 && gv[1] != V1Beta1 {
			return fmt.Errorf("ipamutil: %s version %q: want %s or %s", gv[0], gv[1], V1Beta2, V1Beta1)
		}
	}
	return nil
}

// needed are the resources the reconciler uses, per group: a version
// serves the group only when it has all of them.
var needed = map[string][]string{
	IPAMGroup:    {"ipaddressclaims", "ipaddressclaims/status", "ipaddresses"},
	ClusterGroup: {"clusters"},
}

// DiscoverVersions asks the API server (discovery) which versions of the
// two Cluster API groups it serves, and picks per group v1beta2 when it
// serves it with the resources the reconciler uses, else v1beta1. A group
// served at neither gives an error wrapping ErrNotServed that names what
// is served.
func DiscoverVersions(d discovery.DiscoveryInterface) (Versions, error) {
	groups, err := d.ServerGroups()
	if err != nil {
		return Versions{}, fmt.Errorf("ipamutil: discover the API groups: %w", err)
	}
	served := map[string][]string{}
	for _, g := range groups.Groups {
		for _, v := range g.Versions {
			served[g.Name] = append(served[g.Name], v.Version)
		}
	}
	var out Versions
	for _, group := range []string{IPAMGroup, ClusterGroup} {
		v, err := pickVersion(d, group, served[group])
		if err != nil {
			return Versions{}, err
		}
		if group == IPAMGroup {
			out.IPAM = v
		} else {
			out.Cluster = v
		}
	}
	return out, nil
}

// pickVersion is the first of v1beta2, v1beta1 that serves the group's
// needed resources.
func pickVersion(d discovery.DiscoveryInterface, group string, served []string) (string, error) {
	for _, v := range []string{V1Beta2, V1Beta1} {
		if !slices.Contains(served, v) {
			continue
		}
		list, err := d.ServerResourcesForGroupVersion(group + "/" + v)
		if apierrors.IsNotFound(err) {
			continue // gone between the two calls
		}
		if err != nil {
			return "", fmt.Errorf("ipamutil: discover the resources of %s/%s: %w", group, v, err)
		}
		have := map[string]bool{}
		for _, r := range list.APIResources {
			have[r.Name] = true
		}
		if !slices.ContainsFunc(needed[group], func(r string) bool { return !have[r] }) {
			return v, nil
		}
	}
	return "", fmt.Errorf("%w: %s serves versions %v, resources needed: %v", ErrNotServed, group, served, needed[group])
}

// ErrVersionsChanged: the versions DiscoverVersions picks are no longer
// those the provider started with (a Cluster API upgrade added v1beta2,
// or removed the version in use).
var ErrVersionsChanged = errors.New("ipamutil: the served Cluster API versions changed")

// VersionWatch is a manager Runnable that asks discovery every Interval
// which versions it would pick now, and returns an error wrapping
// ErrVersionsChanged when they differ from Started: the manager then
// stops, and the process should exit so that its restart (the
// Deployment's) talks the new versions. A discovery error is logged
// through OnError and retried at the next tick.
type VersionWatch struct {
	Discovery discovery.DiscoveryInterface
	Started   Versions
	Interval  time.Duration
	// OnError, when set, is told of discovery errors.
	OnError func(error)
}

// Start implements manager.Runnable; it runs until ctx ends or the
// versions change.
func (w *VersionWatch) Start(ctx context.Context) error {
	interval := w.Interval
	if interval <= 0 {
		interval = time.Minute
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		now, err := DiscoverVersions(w.Discovery)
		if err != nil && !errors.Is(err, ErrNotServed) {
			if w.OnError != nil {
				w.OnError(err)
			}
			continue
		}
		if err != nil || now.normal() != w.Started.normal() {
			return fmt.Errorf("%w: started with %s, now %s (%v)", ErrVersionsChanged, w.Started, now, err)
		}
	}
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every
// replica watches, so that a standby does not keep old versions either.
func (w *VersionWatch) NeedLeaderElection() bool { return false }

// ClaimObject returns an empty IPAddressClaim of the served version,
// for a watch (For, Watches) or an index.
func (v Versions) ClaimObject() client.Object {
	if v.normal().IPAM == V1Beta1 {
		return &ipamv1beta1.IPAddressClaim{}
	}
	return &ipamv1.IPAddressClaim{}
}

// AddressObject returns an empty IPAddress of the served version.
func (v Versions) AddressObject() client.Object {
	if v.normal().IPAM == V1Beta1 {
		return &ipamv1beta1.IPAddress{}
	}
	return &ipamv1.IPAddress{}
}

// ClusterObject returns an empty Cluster of the served version.
func (v Versions) ClusterObject() client.Object {
	if v.normal().Cluster == V1Beta1 {
		return &clusterv1beta1.Cluster{}
	}
	return &clusterv1.Cluster{}
}

// ToIPAddressClaim returns obj, an IPAddressClaim of either version (from
// a watch event), as a v1beta2 IPAddressClaim; a v1beta2 obj is returned
// as it is, not copied.
func ToIPAddressClaim(obj runtime.Object) (*ipamv1.IPAddressClaim, error) {
	return toInternal[ipamv1.IPAddressClaim](obj)
}

// ToIPAddress is ToIPAddressClaim for IPAddresses.
func ToIPAddress(obj runtime.Object) (*ipamv1.IPAddress, error) {
	return toInternal[ipamv1.IPAddress](obj)
}

// ToCluster is ToIPAddressClaim for Clusters.
func ToCluster(obj runtime.Object) (*clusterv1.Cluster, error) {
	return toInternal[clusterv1.Cluster](obj)
}

func toInternal[T any](obj runtime.Object) (*T, error) {
	if t, ok := any(obj).(*T); ok {
		return t, nil
	}
	out := new(T)
	if err := convert(obj, any(out).(runtime.Object)); err != nil {
		return nil, err
	}
	return out, nil
}

// conversionScheme knows both versions of both groups and Cluster API's
// generated and hand-written conversions between them (registered by the
// v1beta1 packages' AddToScheme).
var conversionScheme = sync.OnceValues(func() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{ipamv1.AddToScheme, ipamv1beta1.AddToScheme, clusterv1.AddToScheme, clusterv1beta1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("ipamutil: conversion scheme: %w", err)
		}
	}
	return s, nil
})

// convert converts in into out (a pointer to a struct of the other
// version), replacing all of out: fields that in does not set are zero.
func convert(in, out runtime.Object) error {
	s, err := conversionScheme()
	if err != nil {
		return err
	}
	ov := reflect.ValueOf(out)
	if ov.Kind() != reflect.Pointer || ov.IsNil() {
		return fmt.Errorf("ipamutil: convert %T into %T: want a non-nil pointer", in, out)
	}
	fresh := reflect.New(ov.Elem().Type())
	if err := s.Convert(in, fresh.Interface(), nil); err != nil {
		return fmt.Errorf("ipamutil: convert %T to %T: %w", in, out, err)
	}
	ov.Elem().Set(fresh.Elem())
	return nil
}

// wireOf returns an empty object of the served version for obj, an
// object of the internal (v1beta2) shape, when the two differ; false when
// obj is to be sent as it is.
func (v Versions) wireOf(obj runtime.Object) (runtime.Object, bool) {
	n := v.normal()
	if n.IPAM == V1Beta1 {
		switch obj.(type) {
		case *ipamv1.IPAddressClaim:
			return &ipamv1beta1.IPAddressClaim{}, true
		case *ipamv1.IPAddressClaimList:
			return &ipamv1beta1.IPAddressClaimList{}, true
		case *ipamv1.IPAddress:
			return &ipamv1beta1.IPAddress{}, true
		case *ipamv1.IPAddressList:
			return &ipamv1beta1.IPAddressList{}, true
		}
	}
	if n.Cluster == V1Beta1 {
		switch obj.(type) {
		case *clusterv1.Cluster:
			return &clusterv1beta1.Cluster{}, true
		case *clusterv1.ClusterList:
			return &clusterv1beta1.ClusterList{}, true
		}
	}
	return nil, false
}
