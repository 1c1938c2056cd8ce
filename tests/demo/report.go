package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/contiv-ipam/agent/plugins/ipam"
	"github.com/contiv-ipam/agent/tests/cluster"
)

// learnTimeout bounds the wait for the agents to learn their pods.
const learnTimeout = 60 * time.Second

// report waits until each agent holds its pods, then prints each agent's
// IPAM and allocations and the processes started.
func (d *demo) report(ctx context.Context, pods []pod) error {
	for _, a := range d.cluster.Agents {
		if err := learn(ctx, a, pods); err != nil {
			return err
		}
	}
	for _, a := range d.cluster.Agents {
		for _, path := range []string{ipam.IPAMPath, ipam.AllocationsPath} {
			if err := d.printGet(ctx, a.Node, a.REST+path); err != nil {
				return err
			}
		}
	}
	var procs []string
	for _, p := range d.cluster.Procs() {
		procs = append(procs, fmt.Sprintf("%s=%d", p.Name, p.PID()))
	}
	d.printf("processes: %s (and the API server's kube-apiserver and etcd)\n", strings.Join(procs, " "))
	return nil
}

// learn asks the agent for resyncs until its allocations hold each of its
// pods (contiv-ksr mirrors them into etcd first).
func learn(ctx context.Context, a *cluster.Agent, pods []pod) error {
	ctx, cancel := context.WithTimeout(ctx, learnTimeout)
	defer cancel()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		missing, err := missingPods(ctx, a, pods)
		if err == nil && len(missing) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("agent %s: pods %v not in its allocations (last error: %v): %w", a.Node, missing, err, ctx.Err())
		case <-tick.C:
		}
	}
}

// missingPods resyncs the agent and returns its pods that its
// allocations lack.
func missingPods(ctx context.Context, a *cluster.Agent, pods []pod) ([]string, error) {
	if err := a.Resync(ctx); err != nil {
		return nil, err
	}
	allocs, err := a.Allocations(ctx)
	if err != nil {
		return nil, err
	}
	held := map[string]string{}
	for _, al := range allocs {
		held[al.PodID.Name] = al.Addr()
	}
	var missing []string
	for _, p := range pods {
		if p.node == a.Node && held[p.name] != p.ip {
			missing = append(missing, p.name)
		}
	}
	return missing, nil
}

// printGet prints "== <node>: GET <url>", the indented JSON answer and an
// empty line.
func (d *demo) printGet(ctx context.Context, node, url string) error {
	var raw json.RawMessage
	if err := cluster.GetJSON(ctx, url, &raw); err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return err
	}
	d.printf("== %s: %s %s\n%s\n\n", node, http.MethodGet, url, buf.String())
	return nil
}
