//go:build node

package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// DemoOptions shape Demo.
type DemoOptions struct {
	// Replicas is the size of the Deployment (default 20).
	Replicas int32
	// Hold, when set, is waited on after the report, before the node
	// stops (the demo's -hold: until Ctrl-C).
	Hold <-chan struct{}
}

// demoNamespace and demoName name the demo's Deployment.
const demoNamespace, demoName = "default", "demo"

// Demo brings a node up in dir, runs a Deployment of busybox pods on it,
// prints the node, the pods with their addresses (kubectl get nodes and
// get pods -o wide) and, side by side, each pod's status.podIPs and the
// agent's allocation for it; then it stops the node and says what it
// left on the machine (nothing, or the error says what). Every step and
// its time goes to out.
func Demo(ctx context.Context, out io.Writer, dir string, bins Bins, o DemoOptions) (err error) {
	if o.Replicas == 0 {
		o.Replicas = 20
	}
	logf := func(format string, args ...any) { _, _ = fmt.Fprintf(out, format+"\n", args...) }
	n, err := Start(ctx, dir, bins, Options{Logf: logf})
	if err != nil {
		return err
	}
	defer func() {
		logf("== stopping the node")
		err = errors.Join(err, n.Stop())
		if left := n.Leftovers(); len(left) > 0 {
			err = errors.Join(err, fmt.Errorf("left on the machine: %s", strings.Join(left, "; ")))
		} else {
			logf("stopped: no process, mount, network namespace, cgroup, log link or CNI cache entry of the node is left")
		}
	}()
	logf("node %s Ready %s after kubelet's start; kubeconfig %s", n.Name, n.Timings.KubeletReady.Round(time.Millisecond), n.Kube.Kubeconfig)

	t0 := time.Now()
	if err := n.CreateDeployment(ctx, BusyboxDeployment(demoNamespace, demoName, o.Replicas)); err != nil {
		return err
	}
	if _, err := n.WaitPodsRunning(ctx, demoNamespace, LabelApp+"="+demoName, int(o.Replicas), 5*time.Minute); err != nil {
		return err
	}
	logf("Deployment %s: %d pods Running %s after its creation", demoName, o.Replicas, time.Since(t0).Round(time.Millisecond))

	for _, args := range [][]string{{"get", "nodes", "-o", "wide"}, {"get", "pods", "-o", "wide"}} {
		logf("\n$ kubectl %s", strings.Join(args, " "))
		cmd := n.Kube.KubectlCmd(ctx, args...)
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
		}
	}
	if err := n.printSideBySide(ctx, out); err != nil {
		return err
	}
	if o.Hold != nil {
		logf("\nthe node runs: kubectl --kubeconfig %s ...; Ctrl-C stops it", n.Kube.Kubeconfig)
		select {
		case <-o.Hold:
		case <-ctx.Done():
		}
	}
	return nil
}

// printSideBySide prints each pod's addresses beside the agent's
// allocation for it, and the agent's pod subnet.
func (n *Node) printSideBySide(ctx context.Context, out io.Writer) error {
	info, err := n.Agent.IPAM(ctx)
	if err != nil {
		return err
	}
	pods, err := n.Pods(ctx, demoNamespace, "")
	if err != nil {
		return err
	}
	allocs, err := n.AllocatedIPs(ctx)
	if err != nil {
		return err
	}
	_, _ = fmt.Fprintf(out, "\nthe agent (node ID %d, podSubnetThisNode %s) and Kubernetes, side by side:\n", info.NodeID, info.PodSubnetThisNode)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "POD\tSTATUS.PODIPS\tAGENT ALLOCATION\tSAME")
	same := 0
	for _, p := range pods {
		key := p.Namespace + "/" + p.Name
		ips, held := PodIPs(p), allocs[key]
		ok := slices.Equal(sorted(ips), sorted(held))
		if ok {
			same++
		}
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%t\n", key, strings.Join(ips, ","), strings.Join(held, ","), ok)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, _ = fmt.Fprintf(out, "%d of %d pods have the agent's address; the agent holds %d allocations\n", same, len(pods), len(allocs))
	if same != len(pods) || len(allocs) != len(pods) {
		return fmt.Errorf("the pods' addresses and the agent's allocations differ")
	}
	return nil
}

// sorted is a sorted copy.
func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
