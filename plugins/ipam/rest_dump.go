package ipam

import (
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"github.com/contiv-ipam/agent/infra/rest"
)

// DumpPath is the REST path of the Cilium-style dump of the allocations.
const DumpPath = "/contiv/v1/ipam/dump"

// IPAMDump is the reply of GET /contiv/v1/ipam/dump: Dump and DebugStatus
// of one snapshot.
type IPAMDump struct {
	// IPv4 and IPv6 map each allocated address to its owner (see Dump);
	// empty, never null, for a family the node does not have.
	IPv4 map[string]string `json:"ipv4"`
	IPv6 map[string]string `json:"ipv6"`
	// Status is Dump's one-liner.
	Status string `json:"status"`
	// DebugStatus is DebugStatus(): the one-liner, then one line per
	// allocation ("<ip>\t<owner>"), in address order per family.
	DebugStatus string `json:"debugStatus"`
}

func (p *Plugin) dumpHandler(f *rest.Formatter) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if !p.ready() {
			f.Error(w, http.StatusServiceUnavailable, p.notReady())
			return
		}
		v4, v6, status := p.Dump()
		f.JSON(w, http.StatusOK, IPAMDump{IPv4: v4, IPv6: v6, Status: status, DebugStatus: debugStatusOf(v4, v6, status)})
	}
}

// debugStatusOf is DebugStatus of one Dump, so that the reply's maps and
// lines are of the same snapshot (DebugStatus dumps again).
func debugStatusOf(v4, v6 map[string]string, status string) string {
	var b strings.Builder
	b.WriteString(status)
	b.WriteByte('\n')
	for _, m := range []map[string]string{v4, v6} {
		ips := make([]netip.Addr, 0, len(m))
		for s := range m {
			if a, err := netip.ParseAddr(s); err == nil {
				ips = append(ips, a)
			}
		}
		slices.SortFunc(ips, func(a, b netip.Addr) int { return a.Compare(b) })
		for _, a := range ips {
			fmt.Fprintf(&b, "%s\t%s\n", a, m[a.String()])
		}
	}
	return b.String()
}
