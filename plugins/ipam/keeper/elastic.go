package keeper

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/contiv-ipam/agent/engine/ipalloc"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ksr/model/poolblock"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// elastic is the keeper's part of the elastic pools (owned by the
// keeper's goroutine): how many added blocks each slot wants, the blocks
// being given back, and since when each added block is empty.
type elastic struct {
	want       [2]int
	releasing  []netip.Prefix
	emptySince map[netip.Prefix]time.Time
	// claims carries the newest claim to the claimer goroutine (one
	// slot: a newer claim replaces one not sent yet).
	claims chan poolblock.Claim
}

func newElastic() elastic {
	return elastic{emptySince: map[netip.Prefix]time.Time{}, claims: make(chan poolblock.Claim, 1)}
}

// on tells whether elastic pools are configured.
func (k *Keeper) elasticOn() bool {
	return k.cfg.WarmTarget > 0 && k.tab != nil && !k.tab.externalMode()
}

// checkWarm asks for one more block of slot i when its free addresses
// (cooling ones count as used) fell below the warm target and no request
// is pending.
func (k *Keeper) checkWarm(i int) {
	t := k.tab
	if !k.elasticOn() || i >= t.slots() || t.free(i) >= uint64(k.cfg.WarmTarget) {
		return
	}
	if k.el.want[i] > len(t.unrevoked(i))-1 {
		return // a request is pending
	}
	k.el.want[i] = len(t.unrevoked(i))
	k.log.Info("free pod addresses below the warm target: asking for a pool", "free", t.free(i),
		"warm-target", k.cfg.WarmTarget, "pools", t.blockList(i))
	k.sendClaim()
}

// growing turns "pool exhausted" into "try again later" while a block is
// claimed from nodeipam: the pools grow within moments, and contiv-cni
// repeats such an ADD (its tryAgainBudget) rather than fail it.
func (k *Keeper) growing(err error) error {
	if !errors.Is(err, ipalloc.ErrPoolExhausted) || !k.claimPending() {
		return err
	}
	return fmt.Errorf("%w: the pools of this node are full and a block is claimed from nodeipam (%v)", podmanager.ErrTryAgain, err)
}

// claimPending tells whether a family waits for a claimed block.
func (k *Keeper) claimPending() bool {
	if !k.elasticOn() {
		return false
	}
	for i := range k.tab.slots() {
		if k.el.want[i] > len(k.tab.unrevoked(i))-1 {
			return true
		}
	}
	return false
}

// sendClaim hands the current claim to the claimer goroutine.
func (k *Keeper) sendClaim() {
	c := poolblock.Claim{Node: k.tab.st.NodeName, Want: map[string]int{}, Release: slices.Clone(k.el.releasing)}
	for i, f := range k.tab.st.Families() {
		if n := k.el.want[i]; n > 0 {
			c.Want[poolblock.Family(f.PodThis)] = n
		}
	}
	select {
	case <-k.el.claims: // replaced by the newer one
	default:
	}
	k.el.claims <- c
}

// applyGrant makes the added blocks follow the node's grant: a granted
// block the node does not hold is added (unless the node is giving it
// back); a released block the grant no longer lists is forgotten.
func (k *Keeper) applyGrant(t *table, g poolblock.Grant) {
	if t.externalMode() {
		return
	}
	granted := map[netip.Prefix]bool{}
	for _, pfx := range g.Blocks {
		granted[pfx] = true
		if i, j, held := t.findBlock(pfx); held {
			t.blocks[i][j].revoked = false
			continue
		}
		if slices.Contains(k.el.releasing, pfx) {
			continue
		}
		if err := k.addBlock(t, pfx); err != nil {
			k.log.Warn("granted pool not added", "pool", pfx.String(), "error", err)
		}
	}
	k.el.releasing = slices.DeleteFunc(k.el.releasing, func(p netip.Prefix) bool { return !granted[p] })
	k.revokeUngranted(t, granted)
	for i := range t.slots() {
		k.el.want[i] = max(k.el.want[i], len(t.unrevoked(i))-1)
	}
}

// revokeUngranted revokes the added blocks the grant does not list (the
// node did not give them back: nodeipam freed them, its Node was deleted),
// and claims again: nothing new comes from them, so that another node
// that gets them never meets an address handed out here afterwards.
func (k *Keeper) revokeUngranted(t *table, granted map[netip.Prefix]bool) {
	revoked := false
	for _, bs := range t.blocks {
		for j, b := range bs {
			if j == 0 || granted[b.prefix] || b.revoked {
				continue
			}
			b.revoked, revoked = true, true
			k.log.Warn("added pool revoked: the node's grant no longer lists it; nothing new is handed out from it, and it goes once empty",
				"pool", b.prefix.String(), "assigned", t.blockStats(b).Assigned)
		}
	}
	if revoked && k.elasticOn() {
		for i := range t.slots() {
			k.el.want[i] = len(t.unrevoked(i)) - 1
			k.checkWarm(i) // without the revoked blocks: more may be wanted
		}
		k.sendClaim()
	}
	if revoked {
		k.dropRevokedEmpty(t)
	}
}

// unrevoked lists the blocks of slot i that are not revoked.
func (t *table) unrevoked(i int) []*block {
	var out []*block
	for _, b := range t.blocks[i] {
		if !b.revoked {
			out = append(out, b)
		}
	}
	return out
}

// dropRevokedEmpty forgets the revoked blocks that are empty (nothing
// assigned): not granted any more, they are not released either.
func (k *Keeper) dropRevokedEmpty(t *table) {
	for i := range t.slots() {
		for j := len(t.blocks[i]) - 1; j > 0; j-- {
			b := t.blocks[i][j]
			if !b.revoked || t.blockStats(b).Assigned > 0 {
				continue
			}
			rest := slices.DeleteFunc(t.added(), func(p netip.Prefix) bool { return p == b.prefix })
			if err := k.storeBlocks(rest); err != nil {
				k.log.Warn("dropping an empty revoked pool failed; retrying later", "pool", b.prefix.String(), "error", err)
				continue
			}
			t.dropBlock(i, j)
			k.log.Info("empty revoked pool dropped", "pool", b.prefix.String())
		}
	}
}

// addBlock adds a block to t and stores the list of added blocks.
func (k *Keeper) addBlock(t *table, pfx netip.Prefix) error {
	i, ok := t.slotOf(pfx.Addr())
	if !ok {
		return disabledErr(pfx.Addr().Is6())
	}
	for _, b := range t.blocks[i] {
		if b.prefix.Overlaps(pfx) {
			return errOverlap(pfx, b.prefix)
		}
	}
	b, err := newBlock(pfx)
	if err != nil {
		return err
	}
	if err := k.storeBlocks(append(t.added(), pfx)); err != nil {
		return err
	}
	t.blocks[i] = append(t.blocks[i], b)
	k.excludeIn(t, b)
	k.log.Info("pod address pool added", "pool", pfx.String(), "pools", t.blockList(i))
	return nil
}

// shrink gives back the added blocks that have been empty (nothing
// assigned, nothing cooling down) for the block cooldown, as long as the
// free addresses of their family stay at the minimum free target without
// them. It runs in the sweep.
func (k *Keeper) shrink() {
	if !k.elasticOn() {
		return
	}
	t, now := k.tab, k.clock.Now()
	k.dropRevokedEmpty(t)
	for i := range t.slots() {
		for j := len(t.blocks[i]) - 1; j > 0; j-- {
			b := t.blocks[i][j]
			s := t.blockStats(b)
			if s.Assigned > 0 || s.Cooldown > 0 {
				delete(k.el.emptySince, b.prefix)
				continue
			}
			since, ok := k.el.emptySince[b.prefix]
			if !ok {
				k.el.emptySince[b.prefix] = now
				k.pipe.rearm = true // the sweep runs again at the end of its block cooldown
				continue
			}
			if now.Sub(since) < k.cfg.BlockCooldown || t.free(i)-s.Free < uint64(k.cfg.MinFreeTarget) {
				continue
			}
			k.giveBack(t, i, j)
		}
	}
}

// giveBack removes empty block j of slot i and tells nodeipam.
func (k *Keeper) giveBack(t *table, i, j int) {
	b := t.blocks[i][j]
	rest := slices.DeleteFunc(t.added(), func(p netip.Prefix) bool { return p == b.prefix })
	if err := k.storeBlocks(rest); err != nil {
		k.log.Warn("giving back an empty pool failed; retrying later", "pool", b.prefix.String(), "error", err)
		return
	}
	t.dropBlock(i, j)
	delete(k.el.emptySince, b.prefix)
	k.el.releasing = append(k.el.releasing, b.prefix)
	k.el.want[i] = len(t.blocks[i]) - 1
	k.log.Info("empty pod address pool given back", "pool", b.prefix.String(), "empty-for", k.cfg.BlockCooldown.String())
	k.sendClaim()
}

// nextShrink is when the sweep must run for the block cooldowns, zero
// when no block is waiting.
func (k *Keeper) nextShrink() time.Time {
	var first time.Time
	for _, since := range k.el.emptySince {
		if at := since.Add(k.cfg.BlockCooldown); first.IsZero() || at.Before(first) {
			first = at
		}
	}
	return first
}

// grantOf reads this node's grant from the Kubernetes state.
func grantOf(ks api.KubeStateData, node string) (poolblock.Grant, bool) {
	v, ok := ks[poolblock.GrantKeyword][poolblock.GrantKey(node)].(*structpb.Struct)
	if !ok {
		return poolblock.Grant{}, false
	}
	return GrantFromStruct(v)
}

// GrantFromStruct decodes a grant carried as a generic struct.
func GrantFromStruct(v *structpb.Struct) (poolblock.Grant, bool) {
	b, err := protojson.Marshal(v)
	if err != nil {
		return poolblock.Grant{}, false
	}
	g, err := poolblock.ParseGrant(b)
	return g, err == nil
}
