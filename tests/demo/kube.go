package main

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
)

// pod is one demo Pod: its node and the status.podIP it is given.
type pod struct {
	name, node, ip string
}

// demoPods are two pods per node, at hosts 10 and 11 of its pod subnet.
func demoPods(subnets map[string]netip.Prefix) []pod {
	names := map[string][]string{nodes[0]: {"web-1", "db-1"}, nodes[1]: {"web-2", "cache-1"}}
	var out []pod
	for _, n := range nodes {
		ip := subnets[n].Masked().Addr()
		for range 10 {
			ip = ip.Next()
		}
		for _, name := range names[n] {
			out = append(out, pod{name: name, node: n, ip: ip.String()})
			ip = ip.Next()
		}
	}
	return out
}

// subnets reads each agent's pod subnet from its GET /contiv/v1/ipam.
func (d *demo) subnets(ctx context.Context) (map[string]netip.Prefix, error) {
	out := map[string]netip.Prefix{}
	for _, a := range d.cluster.Agents {
		info, err := a.IPAM(ctx)
		if err != nil {
			return nil, err
		}
		p, err := netip.ParsePrefix(info.PodSubnetThisNode)
		if err != nil {
			return nil, fmt.Errorf("pod subnet of %s: %w", a.Node, err)
		}
		out[a.Node] = p
	}
	return out, nil
}

// manifest is the YAML of the Nodes and Pods, as kubectl apply reads it.
func manifest(pods []pod) string {
	var docs []string
	for _, n := range nodes {
		docs = append(docs, fmt.Sprintf("apiVersion: v1\nkind: Node\nmetadata:\n  name: %s\n", n))
	}
	for _, p := range pods {
		docs = append(docs, fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: default\n"+
			"spec:\n  nodeName: %s\n  containers:\n  - name: main\n    image: registry.k8s.io/pause:3.10\n", p.name, p.node))
	}
	return strings.Join(docs, "---\n")
}

// populate creates the Nodes and Pods with kubectl and sets each Pod's IP
// through the status subresource.
func (d *demo) populate(ctx context.Context, pods []pod) error {
	if err := d.kubectl(ctx, manifest(pods), "apply", "-f", "-"); err != nil {
		return err
	}
	for _, p := range pods {
		patch := fmt.Sprintf(`{"status":{"podIP":%q,"podIPs":[{"ip":%q}]}}`, p.ip, p.ip)
		if err := d.kubectl(ctx, "", "patch", "pod", p.name, "-n", "default", "--subresource=status",
			"--type=merge", "-p", patch); err != nil {
			return err
		}
	}
	return nil
}

// kubectl runs kubectl with args (and stdin, if not ""), printing the
// command and its output.
func (d *demo) kubectl(ctx context.Context, stdin string, args ...string) error {
	cmd := d.kube.KubectlCmd(ctx, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	d.printf("$ kubectl %s\n%s", shellWords(args), out)
	if err != nil {
		return fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// shellWords joins args as a shell would read them back: an arg with
// other than letters, digits and -_./=: is single-quoted.
func shellWords(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		if strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:") != "" {
			out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(out, " ")
}
