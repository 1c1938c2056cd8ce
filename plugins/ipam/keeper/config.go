package keeper

import (
	"errors"
	"fmt"
	"time"
)

// Config is ipam.conf: how the plugin keeps the pod addresses. The
// addressing itself (subnets, prefix lengths) is contiv.conf's ipamConfig.
type Config struct {
	// AbsentPodGracePeriod is how long an address stays held for a pod
	// that the Kubernetes state does not have (a pod deleted while the
	// agent was down or the watch was cut off, or not reflected yet)
	// before it is released: the pod must be missing at both ends. 0
	// releases at once. It only runs while the Kubernetes state is read
	// from etcd and holds pods: a resync from the local mirror pauses it,
	// an empty state stops it.
	AbsentPodGracePeriod time.Duration `json:"absentPodGracePeriod"`
	// StoreTimeout bounds the wait of one write of the pod allocations in
	// the local store's queue (still queued then: withdrawn, not applied),
	// and one read. A write the store has taken keeps its commit's
	// outcome; one of unknown outcome is read back, ordered after it,
	// before anything is freed.
	StoreTimeout time.Duration `json:"storeTimeout"`
	// CNIReservationTimeout is how long the addresses of a CNI ADD stay
	// reserved unconfirmed: contiv-cni confirms them once the pod's
	// interface is configured; when it never does (the runtime or the
	// plugin died mid-ADD) they are released then. 0 makes every ADD
	// confirmed at once (no reservation).
	CNIReservationTimeout time.Duration `json:"cniReservationTimeout"`
	// AddressCooldown is how long a released address is not handed out
	// again (unless no other address is free): peers may still route to
	// it, and a crash-looping pod does not get its predecessor's address.
	// 0 frees it at once. Cooling addresses count as used.
	AddressCooldown time.Duration `json:"addressCooldown"`
	// WarmTarget turns on elastic pools (with the agent's pool claimer):
	// when the free addresses of a family fall below it, the agent asks
	// nodeipam for one more block (poolblock.Claim). 0: off.
	WarmTarget int `json:"warmTarget"`
	// MinFreeTarget: an empty added block is given back only if its
	// family keeps at least this many free addresses without it.
	MinFreeTarget int `json:"minimumFreeTarget"`
	// BlockCooldown is how long an added block must stay empty (nothing
	// assigned, nothing cooling down) before it is given back.
	BlockCooldown time.Duration `json:"blockCooldown"`
}

// DefaultConfig returns the defaults: a 10-minute grace period, 10 s per
// store operation, CNI reservations of 10 minutes (Cilium's default
// IPAM expiration), a 30 s address cooldown (the AWS VPC CNI's).
func DefaultConfig() Config {
	return Config{AbsentPodGracePeriod: 10 * time.Minute, StoreTimeout: 10 * time.Second, CNIReservationTimeout: 10 * time.Minute,
		AddressCooldown: 30 * time.Second, BlockCooldown: time.Minute}
}

// Validate names every bad key and value.
func (c *Config) Validate() error {
	var errs []error
	if c.AbsentPodGracePeriod < 0 {
		errs = append(errs, fmt.Errorf("absentPodGracePeriod %s: want a duration >= 0", c.AbsentPodGracePeriod))
	}
	if c.WarmTarget < 0 || c.MinFreeTarget < 0 {
		errs = append(errs, fmt.Errorf("warmTarget %d, minimumFreeTarget %d: want counts >= 0", c.WarmTarget, c.MinFreeTarget))
	}
	if c.BlockCooldown < 0 {
		errs = append(errs, fmt.Errorf("blockCooldown %s: want a duration >= 0", c.BlockCooldown))
	}
	if c.AddressCooldown < 0 {
		errs = append(errs, fmt.Errorf("addressCooldown %s: want a duration >= 0", c.AddressCooldown))
	}
	if c.CNIReservationTimeout < 0 {
		errs = append(errs, fmt.Errorf("cniReservationTimeout %s: want a duration >= 0", c.CNIReservationTimeout))
	}
	if c.StoreTimeout <= 0 {
		errs = append(errs, fmt.Errorf("storeTimeout %s: want a positive duration", c.StoreTimeout))
	}
	return errors.Join(errs...)
}
