package cnibench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/contiv-ipam/agent/plugins/podmanager/cni"
	"github.com/contiv-ipam/agent/tests/testenv"
)

// benchDualStackConf adds an IPv6 family to benchContivConf: node ID 1
// gets fd00:10:1:1::/112 (65,532 pod addresses) beside 10.129.0.0/16.
const benchDualStackConf = benchContivConf + `  dualStack:
    podSubnetCIDR: fd00:10:1::/96
    podSubnetOneNodePrefixLen: 112
    vppHostSubnetCIDR: fd00:30::/96
    vppHostSubnetOneNodePrefixLen: 120
    vxlanCIDR: fd00:17::/112
    serviceCIDR: fd00:96::/112
`

// BenchmarkGRPCAddStack compares, at 16 callers, durable Adds of a
// single-stack node with those of a dual-stack node (one address per
// family in one record), and the dual-stack Add that contiv-cni makes:
// an expiring reservation, then its Confirm (two durable writes). Each
// sub-benchmark has an agent of its own. Reports adds/s and the p50/p99
// latency of a whole ADD (Add, or Add and Confirm).
func BenchmarkGRPCAddStack(b *testing.B) {
	const callers = 16
	for _, tc := range []struct {
		name    string
		conf    string
		confirm bool
	}{
		{"stack=single", benchContivConf, false},
		{"stack=dual", benchDualStackConf, false},
		{"stack=dual+confirm", benchDualStackConf, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			a := testenv.StartAgent(b, testenv.Options{Node: "cnibench-stack", Conf: map[string]string{
				"contiv.conf": tc.conf,
				"ipam.conf":   "absentPodGracePeriod: 1h\nstoreTimeout: 10s\ncniReservationTimeout: 10m\n",
			}})
			clients := dialN(b, a.Socket, callers)
			b.ResetTimer()
			lat, elapsed := timeConcurrently(b, clients, b.N, func(rc cni.RemoteCNIClient, i int64) error {
				return addOne(rc, fmt.Sprintf("stack-%d", i), tc.confirm)
			})
			b.StopTimer()
			reportLatency(b, lat)
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "adds/s")
		})
	}
}

// addOne is one ADD: Add (asking for a reservation when confirm is set),
// checked to hold one interface, and, with a reservation, its Confirm.
func addOne(rc cni.RemoteCNIClient, containerID string, confirm bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reply, err := rc.Add(ctx, &cni.CNIRequest{
		Version: cniVersion, ContainerId: containerID, NetworkNamespace: "/var/run/netns/" + containerID,
		InterfaceName: "eth0", NetworkName: "bench", Confirms: confirm,
		ExtraNwConfig: fmt.Sprintf(`{"cniVersion":%q,"name":"bench","type":"contiv-cni"}`, cniVersion),
	})
	switch {
	case err != nil:
		return fmt.Errorf("%s: %w", containerID, err)
	case reply.GetResult() != cni.CNIReply_OK:
		return fmt.Errorf("%s: code %d: %s", containerID, reply.GetErrorCode(), reply.GetError())
	case len(reply.GetInterfaces()) != 1:
		return fmt.Errorf("%s: %d interfaces", containerID, len(reply.GetInterfaces()))
	case confirm && reply.GetReservation() == "":
		return fmt.Errorf("%s: no reservation to confirm", containerID)
	case !confirm:
		return nil
	}
	ok, err := rc.Confirm(ctx, &cni.ConfirmRequest{Version: cniVersion, ContainerId: containerID,
		InterfaceName: "eth0", NetworkName: "bench", Reservation: reply.GetReservation()})
	switch {
	case err != nil:
		return fmt.Errorf("%s: confirm: %w", containerID, err)
	case ok.GetResult() != cni.CNIReply_OK:
		return fmt.Errorf("%s: confirm: code %d: %s", containerID, ok.GetErrorCode(), ok.GetError())
	}
	return nil
}
