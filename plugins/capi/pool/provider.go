package pool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/contiv-ipam/agent/plugins/capi/api/v1alpha1"
	"github.com/contiv-ipam/agent/plugins/capi/ipamutil"
)

// The pool kinds the provider serves, in group v1alpha1.GroupVersion.Group.
const (
	KindPool       = "ContivIPPool"
	KindGlobalPool = "GlobalContivIPPool"
)

// poolKey names one pool object (the UID tells a recreated pool apart).
type poolKey struct {
	kind, namespace, name string
	uid                   types.UID
}

func (k poolKey) String() string {
	if k.namespace == "" {
		return k.kind + "/" + k.name
	}
	return k.kind + "/" + k.namespace + "/" + k.name
}

// poolEntry is the engine of one pool and the spec generation it was built
// from.
type poolEntry struct {
	pool       *Pool
	generation int64
}

// Provider serves the claims of ContivIPPools and GlobalContivIPPools from
// the engine. It is the single source of the allocation decisions: one
// Pool per pool object, rebuilt from the pool's IPAddresses read from the
// API server (never the cache) the first time the pool is used, then
// changed only under mu, by the claim handlers and the pool controller.
type Provider struct {
	// Reader lists the IPAddresses when a pool's engine is built: the
	// manager's APIReader (uncached), so that a stale cache cannot hide an
	// address.
	Reader client.Reader
	// Claims reads the claims of a pool through the claim reconciler's
	// index (the manager's cached client).
	Claims client.Reader
	// Clock is the time of the grace periods; nil means the real clock.
	Clock clock.PassiveClock
	// Log is the logger; nil means slog.Default().
	Log *slog.Logger

	mu    sync.Mutex // guards pools and every Pool in it
	pools map[poolKey]*poolEntry
}

var (
	_ ipamutil.ProviderAdapter = (*Provider)(nil)
	_ ipamutil.PoolMatcher     = (*Provider)(nil)
)

// HandlesPool implements ipamutil.PoolMatcher.
func (p *Provider) HandlesPool(ref ipamv1.IPPoolReference) bool {
	return ref.APIGroup == v1alpha1.GroupVersion.Group && (ref.Kind == KindPool || ref.Kind == KindGlobalPool)
}

func (p *Provider) now() clock.PassiveClock {
	if p.Clock == nil {
		return clock.RealClock{}
	}
	return p.Clock
}

func (p *Provider) log() *slog.Logger {
	if p.Log == nil {
		return slog.Default()
	}
	return p.Log
}

// withPool runs fn on the engine of the pool object obj (spec its spec),
// building it from the API's IPAddresses, or rebuilding it for a new spec
// generation, first. A spec that does not parse wraps
// ipamutil.ErrPoolNotReady. p.mu is held while fn runs.
func (p *Provider) withPool(ctx context.Context, key poolKey, generation int64, spec v1alpha1.ContivIPPoolSpec, fn func(*Pool) error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, err := p.entryLocked(ctx, key, generation, spec)
	if err != nil {
		return err
	}
	return fn(e.pool)
}

// entryLocked returns the pool's engine, up to date with generation.
func (p *Provider) entryLocked(ctx context.Context, key poolKey, generation int64, spec v1alpha1.ContivIPPoolSpec) (*poolEntry, error) {
	e := p.pools[key]
	if e != nil && e.generation == generation {
		return e, nil
	}
	parsed, err := ParseSpec(spec)
	if err != nil {
		return nil, fmt.Errorf("pool %s: %w: %w", key, ipamutil.ErrPoolNotReady, err)
	}
	if e != nil {
		rebuilt, out, err := e.pool.Rebuild(parsed)
		if err != nil {
			return nil, fmt.Errorf("pool %s: %w: %w", key, ipamutil.ErrPoolNotReady, err)
		}
		if len(out) > 0 {
			p.log().Warn("pool changed: these claims now hold addresses outside it", "pool", key.String(), "claims", out)
		}
		e.pool, e.generation = rebuilt, generation
		return e, nil
	}
	built, err := p.build(ctx, key, parsed)
	if err != nil {
		return nil, err
	}
	if p.pools == nil {
		p.pools = make(map[poolKey]*poolEntry)
	}
	e = &poolEntry{pool: built, generation: generation}
	p.pools[key] = e
	return e, nil
}

// build makes the engine of a pool and restores the addresses of its
// IPAddresses, read from the API server.
func (p *Provider) build(ctx context.Context, key poolKey, spec *Spec) (*Pool, error) {
	pl, err := New(spec)
	if err != nil {
		return nil, fmt.Errorf("pool %s: %w: %w", key, ipamutil.ErrPoolNotReady, err)
	}
	addrs, err := p.addressesOf(ctx, key)
	if err != nil {
		return nil, err
	}
	for _, ip := range addrs {
		owner := ownerOf(ip.Namespace, ip.Spec.ClaimRef.Name)
		a, perr := netip.ParseAddr(ip.Spec.Address)
		if perr != nil {
			p.log().Warn("IPAddress with an unparseable address left out of its pool", "ipaddress", ip.Namespace+"/"+ip.Name, "address", ip.Spec.Address)
			continue
		}
		if err := pl.Restore(owner, a); err != nil {
			p.log().Error("IPAddress not restored: its address is held twice", "ipaddress", ip.Namespace+"/"+ip.Name, "err", err)
		}
	}
	p.log().Info("pool engine built from the API", "pool", key.String(), "addresses", len(addrs))
	return pl, nil
}

// addressesOf lists the IPAddresses of the pool from the API server.
func (p *Provider) addressesOf(ctx context.Context, key poolKey) ([]ipamv1.IPAddress, error) {
	var list ipamv1.IPAddressList
	var opts []client.ListOption
	if key.namespace != "" {
		opts = append(opts, client.InNamespace(key.namespace))
	}
	if err := p.Reader.List(ctx, &list, opts...); err != nil {
		return nil, fmt.Errorf("pool %s: list the IPAddresses: %w", key, err)
	}
	var out []ipamv1.IPAddress
	for _, ip := range list.Items {
		ref := ip.Spec.PoolRef
		if ref.APIGroup == v1alpha1.GroupVersion.Group && ref.Kind == key.kind && ref.Name == key.name {
			out = append(out, ip)
		}
	}
	return out, nil
}

// forget drops the engine of a pool (it was deleted).
func (p *Provider) forget(key poolKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.pools, key)
}

// ownerOf is the engine's owner of a claim: namespace/name, unique across
// namespaces (a GlobalContivIPPool serves them all).
func ownerOf(namespace, claim string) string { return namespace + "/" + claim }

// errNoPool is a claim whose pool kind the provider does not serve.
var errNoPool = errors.New("not a pool kind of this provider")
