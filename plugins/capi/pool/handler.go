package pool

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/contiv-ipam/agent/plugins/capi/api/v1alpha1"
	"github.com/contiv-ipam/agent/plugins/capi/ipamutil"
)

// SetupWithManager implements ipamutil.ProviderAdapter: a pool that
// appears, changes or goes brings its claims back (a claim waiting with
// PoolNotReady, a pool whose new spec frees addresses).
func (p *Provider) SetupWithManager(_ context.Context, b *ctrl.Builder) error {
	// The builder's manager client is not at hand here; the mapping reads
	// the claims through the reader the index lives in (ClaimsForPool).
	if p.Claims == nil {
		return errors.New("pool: Provider.Claims (the manager's cached client) is required")
	}
	g := v1alpha1.GroupVersion.Group
	b.Watches(&v1alpha1.ContivIPPool{}, handler.EnqueueRequestsFromMapFunc(ipamutil.ClaimsForPool(p.Claims, schema.GroupKind{Group: g, Kind: KindPool})))
	b.Watches(&v1alpha1.GlobalContivIPPool{}, handler.EnqueueRequestsFromMapFunc(ipamutil.ClaimsForPool(p.Claims, schema.GroupKind{Group: g, Kind: KindGlobalPool})))
	return nil
}

// ClaimHandlerFor implements ipamutil.ProviderAdapter.
func (p *Provider) ClaimHandlerFor(c client.Client, claim *ipamv1.IPAddressClaim) ipamutil.ClaimHandler {
	return &claimHandler{p: p, c: c, claim: claim}
}

// claimHandler serves one reconcile of one claim.
type claimHandler struct {
	p     *Provider
	c     client.Client
	claim *ipamv1.IPAddressClaim
	// set by FetchPool
	key        poolKey
	generation int64
	spec       v1alpha1.ContivIPPoolSpec
	deleting   bool
	fetched    bool
}

// FetchPool implements ipamutil.ClaimHandler: the ContivIPPool of the
// claim's namespace or the GlobalContivIPPool its poolRef names.
func (h *claimHandler) FetchPool(ctx context.Context) (client.Object, *ctrl.Result, error) {
	ref := h.claim.Spec.PoolRef
	var obj client.Object
	switch ref.Kind {
	case KindPool:
		pl := &v1alpha1.ContivIPPool{}
		if err := h.c.Get(ctx, client.ObjectKey{Namespace: h.claim.Namespace, Name: ref.Name}, pl); err != nil {
			return nil, nil, err
		}
		obj, h.spec = pl, pl.Spec
	case KindGlobalPool:
		pl := &v1alpha1.GlobalContivIPPool{}
		if err := h.c.Get(ctx, client.ObjectKey{Name: ref.Name}, pl); err != nil {
			return nil, nil, err
		}
		obj, h.spec = pl, pl.Spec
	default:
		return nil, nil, fmt.Errorf("claim %s/%s: pool kind %q: %w", h.claim.Namespace, h.claim.Name, ref.Kind, errNoPool)
	}
	h.key = poolKey{kind: ref.Kind, namespace: obj.GetNamespace(), name: obj.GetName(), uid: obj.GetUID()}
	h.generation, h.deleting, h.fetched = obj.GetGeneration(), obj.GetDeletionTimestamp() != nil, true
	return obj, nil, nil
}

// EnsureAddress implements ipamutil.ClaimHandler: the engine decides the
// address (the same one for the claim until it is released); an existing
// IPAddress's address is recorded as the claim's. A pool being deleted
// hands out nothing new.
func (h *claimHandler) EnsureAddress(ctx context.Context, address *ipamv1.IPAddress) (*ctrl.Result, error) {
	owner := ownerOf(h.claim.Namespace, h.claim.Name)
	var got netip.Addr
	err := h.p.withPool(ctx, h.key, h.generation, h.spec, func(pl *Pool) error {
		if address.Spec.Address != "" {
			a, err := netip.ParseAddr(address.Spec.Address)
			if err != nil {
				return fmt.Errorf("IPAddress %s/%s: address %q: %w", address.Namespace, address.Name, address.Spec.Address, err)
			}
			got = a
			return pl.Restore(owner, a)
		}
		if _, held := pl.Lookup(owner); !held && h.deleting {
			return fmt.Errorf("pool %s is being deleted: %w", h.key, ipamutil.ErrPoolNotReady)
		}
		a, err := pl.Allocate(owner, h.p.now().Now())
		if errors.Is(err, ErrExhausted) {
			return fmt.Errorf("pool %s: %w", h.key, ipamutil.ErrPoolExhausted)
		}
		got = a
		return err
	})
	if err != nil {
		return nil, err
	}
	if address.Spec.Address == "" {
		h.fill(address, got)
	}
	return nil, nil
}

// fill sets the IPAddress spec of a new address.
func (h *claimHandler) fill(address *ipamv1.IPAddress, a netip.Addr) {
	prefix := h.spec.Prefix
	address.Spec.Address = a.String()
	address.Spec.Prefix = &prefix
	address.Spec.Gateway = h.spec.Gateway
}

// ReleaseAddress implements ipamutil.ClaimHandler. The reuse grace period
// counts from the claim's deletion (durable: a restart keeps it, and the
// IPAddress is kept until the period is over, so the rebuilt engine holds
// the address meanwhile); until then the deletion waits (a requeue). The
// deletion timestamp has whole seconds, cut down: the period counts from
// one second after it, so it is never shorter than configured.
func (h *claimHandler) ReleaseAddress(ctx context.Context) (*ctrl.Result, error) {
	if !h.fetched {
		return nil, nil // no pool: nothing is held
	}
	owner := ownerOf(h.claim.Namespace, h.claim.Name)
	start := h.p.now().Now()
	if dt := h.claim.GetDeletionTimestamp(); dt != nil {
		start = dt.Add(time.Second)
	}
	var wait time.Duration
	err := h.p.withPool(ctx, h.key, h.generation, h.spec, func(pl *Pool) error {
		pl.Release(owner, start)
		if g := pl.Spec().Grace; g > 0 {
			wait = start.Add(g).Sub(h.p.now().Now())
		}
		return nil
	})
	if err != nil && !errors.Is(err, ipamutil.ErrPoolNotReady) {
		return nil, err
	}
	if wait > 0 {
		return &ctrl.Result{RequeueAfter: wait}, nil
	}
	return nil, nil
}
