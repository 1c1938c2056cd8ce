package awsdiff

import (
	"net"
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/netlinkwrapper"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/networkutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/logger"
	"github.com/vishvananda/netlink"

	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// --- the AWS side ----------------------------------------------------------

// quiet is a logger.Logger that writes nothing.
type quiet struct{}

func (quiet) Debugf(string, ...any)                    {}
func (quiet) Debug(string)                             {}
func (quiet) Infof(string, ...any)                     {}
func (quiet) Info(string)                              {}
func (quiet) Warnf(string, ...any)                     {}
func (quiet) Warn(string)                              {}
func (quiet) Errorf(string, ...any)                    {}
func (quiet) Error(string)                             {}
func (quiet) Fatalf(string, ...any)                    {}
func (quiet) Panicf(string, ...any)                    {}
func (q quiet) WithFields(logger.Fields) logger.Logger { return q }

var _ logger.Logger = quiet{}

// hostLinks stands for the host's network links that ReadBackingStore
// lists (it keeps an allocation only when its pod's host veth exists) and
// the rules it deletes for the allocations it drops: the datastore's
// netlink is this fake, so that the test never touches the machine's
// links or rules. Every method the datastore does not call panics (the
// embedded interface is nil).
type hostLinks struct {
	netlinkwrapper.NetLink
	veths      map[string]bool // pod "namespace/name" -> its veth exists
	rulesAsked int             // rules the datastore asked to delete
}

func (h *hostLinks) LinkList() ([]netlink.Link, error) {
	var out []netlink.Link
	for pod, up := range h.veths {
		if !up {
			continue
		}
		ns, name, _ := cutPod(pod)
		out = append(out, &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eni" + networkutils.GeneratePodHostVethNameSuffix(ns, name)}})
	}
	return out, nil
}

func (h *hostLinks) NewRule() *netlink.Rule { return netlink.NewRule() }

func (h *hostLinks) RuleDel(*netlink.Rule) error {
	h.rulesAsked++
	return nil
}

// cutPod splits "namespace/name".
func cutPod(pod string) (string, string, bool) {
	for i := range len(pod) {
		if pod[i] == '/' {
			return pod[:i], pod[i+1:], true
		}
	}
	return "", pod, false
}

// aws is the AWS VPC CNI's datastore (secondary-IP mode: every address a
// /32 of its ENI) with an in-memory checkpointer and the fake host links.
type aws struct {
	ds    *datastore.DataStore
	cp    datastore.Checkpointer
	links *hostLinks
}

// newAWS builds the datastore as ipamd does (NewDataStore), with
// IP_COOLDOWN_PERIOD set to the test's cooldown, over cp (nil: a new
// datastore.TestCheckpoint, in memory).
func newAWS(t testing.TB, cp datastore.Checkpointer) *aws {
	t.Helper()
	t.Setenv("IP_COOLDOWN_PERIOD", "30")
	if cp == nil {
		cp = datastore.NewTestCheckpoint(datastore.CheckpointData{Version: datastore.CheckpointFormatVersion})
	}
	a := &aws{ds: datastore.NewDataStore(quiet{}, cp, false, 0), cp: cp, links: &hostLinks{veths: map[string]bool{}}}
	inner(a.ds, "netLink").Set(reflect.ValueOf(netlinkwrapper.NetLink(a.links)))
	return a
}

// inner is the unexported field name of *ptr, settable: how the rig
// reaches the datastore's ENIs, their creation times and its netlink,
// which its API does not expose (GetENIInfos returns copies).
func inner(ptr any, name string) reflect.Value {
	v := reflect.ValueOf(ptr).Elem().FieldByName(name)
	if !v.IsValid() {
		panic("the datastore has no field " + name + ": the rig must follow its source")
	}
	return reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem()
}

// enis is the datastore's ENI pool (its own map: the rig changes times
// in it, never what it holds).
func (a *aws) enis() datastore.ENIPool { return inner(a.ds, "eniPool").Interface().(datastore.ENIPool) }

// coolingNow tells whether the datastore sees addr in its cooldown (as
// its inCoolingPeriod does).
func coolingNow(addr *datastore.AddressInfo) bool {
	return time.Since(addr.UnassignedTime) <= cooldown
}

// age moves the datastore's clock by d: every ENI's creation time and
// every address's release time go back by d (the datastore reads
// time.Now(), which the test cannot move).
func (a *aws) age(d time.Duration) {
	for _, eni := range a.enis() {
		ct := inner(eni, "createTime").Addr().Interface().(*time.Time)
		*ct = ct.Add(-d)
		for _, c := range eni.AvailableIPv4Cidrs {
			for _, addr := range c.IPAddresses {
				if !addr.UnassignedTime.IsZero() {
					addr.UnassignedTime = addr.UnassignedTime.Add(-d)
				}
			}
		}
	}
}

// setYoung makes every ENI but keep younger than the datastore's
// minimum lifetime for one call, and returns what undoes it.
func (a *aws) setYoung(keep string) func() {
	saved := map[*time.Time]time.Time{}
	for id, eni := range a.enis() {
		if id == keep {
			continue
		}
		ct := inner(eni, "createTime").Addr().Interface().(*time.Time)
		saved[ct] = *ct
		*ct = time.Now()
	}
	return func() {
		for p, v := range saved {
			*p = v
		}
	}
}

// only makes want the one address the datastore can hand out for one
// call: every other unassigned address out of its cooldown is put in
// its cooldown (one never used gets an entry that says so); want itself
// is taken out of its cooldown. It returns what undoes it (want keeps
// whatever the call made of it).
func (a *aws) only(want netip.Addr) func() {
	type saved struct {
		addr *datastore.AddressInfo
		at   time.Time
	}
	var undo []saved
	type added struct {
		c  *datastore.CidrInfo
		ip string
	}
	var adds []added
	now := time.Now()
	for _, eni := range a.enis() {
		for _, c := range eni.AvailableIPv4Cidrs {
			ip := c.Cidr.IP.String()
			addr, ok := c.IPAddresses[ip]
			if ip == want.String() {
				if ok && !addr.Assigned() && coolingNow(addr) {
					addr.UnassignedTime = time.Time{}
				}
				continue
			}
			switch {
			case !ok:
				c.IPAddresses[ip] = &datastore.AddressInfo{Address: ip, UnassignedTime: now}
				adds = append(adds, added{c, ip})
			case !addr.Assigned() && !coolingNow(addr):
				undo = append(undo, saved{addr, addr.UnassignedTime})
				addr.UnassignedTime = now
			}
		}
	}
	return func() {
		for _, s := range undo {
			s.addr.UnassignedTime = s.at
		}
		for _, ad := range adds {
			if addr, ok := ad.c.IPAddresses[ad.ip]; ok && !addr.Assigned() {
				delete(ad.c.IPAddresses, ad.ip)
			}
		}
	}
}

// eligible lists the addresses the datastore could hand out now, sorted.
func (a *aws) eligible() []netip.Addr {
	var out []netip.Addr
	for _, eni := range a.enis() {
		for _, c := range eni.AvailableIPv4Cidrs {
			ip := c.Cidr.IP.String()
			addr, ok := c.IPAddresses[ip]
			if !ok || !addr.Assigned() && !coolingNow(addr) {
				out = append(out, netip.MustParseAddr(ip))
			}
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// cooling lists the addresses of eni in their cooldown, sorted (all ENIs
// for "").
func (a *aws) cooling(eniID string) []netip.Addr {
	var out []netip.Addr
	for id, eni := range a.enis() {
		if eniID != "" && id != eniID {
			continue
		}
		for _, c := range eni.AvailableIPv4Cidrs {
			if addr, ok := c.IPAddresses[c.Cidr.IP.String()]; ok && !addr.Assigned() && coolingNow(addr) {
				out = append(out, netip.MustParseAddr(addr.Address))
			}
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// host is the /32 of a.
func host(a netip.Addr) net.IPNet {
	return net.IPNet{IP: net.IP(a.AsSlice()), Mask: net.CIDRMask(32, 32)}
}

// awsUnassign releases key's address in the datastore.
func (a *aws) awsUnassign(key podmanager.AttachmentKey) (string, error) {
	_, ip, _, _, _, err := a.ds.UnassignPodIPAddress(awsKey(key))
	return ip, err
}
