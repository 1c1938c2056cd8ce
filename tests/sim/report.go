package sim

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Report is one run of the simulation at one N, as cmd/sim writes it
// (JSON for the benchmark report).
type Report struct {
	Nodes     int        `json:"nodes"`
	FileLimit uint64     `json:"fileLimit"` // RLIMIT_NOFILE after raising it
	ColdStart *ColdStart `json:"coldStart,omitempty"`
	Idle      *Usage     `json:"idle,omitempty"`
	Churn     *Churn     `json:"churn,omitempty"`
	Replace   *Replace   `json:"replace,omitempty"`
	Kill      *Kill      `json:"kill,omitempty"`
	// Failure says why the run stopped before its end ("" when it did
	// not).
	Failure string `json:"failure,omitempty"`
}

// WriteTable prints the reports side by side, one column per N.
func WriteTable(w io.Writer, reports []Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(name string, f func(r Report) string) {
		cells := []string{name}
		for _, r := range reports {
			cells = append(cells, f(r))
		}
		_, _ = fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t") // tabwriter keeps the error for Flush
	}
	num := func(format string, v float64) string { return fmt.Sprintf(format, v) }
	cold := func(f func(c *ColdStart) string) func(Report) string {
		return func(r Report) string {
			if r.ColdStart == nil {
				return "-"
			}
			return f(r.ColdStart)
		}
	}
	use := func(u func(r Report) *Usage, f func(u *Usage) string) func(Report) string {
		return func(r Report) string {
			if x := u(r); x != nil {
				return f(x)
			}
			return "-"
		}
	}
	coldU := func(r Report) *Usage {
		if r.ColdStart == nil {
			return nil
		}
		return &r.ColdStart.Usage
	}
	idleU := func(r Report) *Usage { return r.Idle }
	churnU := func(r Report) *Usage {
		if r.Churn == nil {
			return nil
		}
		return &r.Churn.Usage
	}
	churn := func(f func(c *Churn) string) func(Report) string {
		return func(r Report) string {
			if r.Churn == nil {
				return "-"
			}
			return f(r.Churn)
		}
	}
	row("nodes", func(r Report) string { return fmt.Sprint(r.Nodes) })
	row("cold start: all ready (s)", cold(func(c *ColdStart) string { return num("%.1f", c.AllReadyMs/1000) }))
	row("  node ready p50 / p99 (s)", cold(func(c *ColdStart) string {
		return fmt.Sprintf("%.1f / %.1f", c.PerNode.P50/1000, c.PerNode.P99/1000)
	}))
	row("  restarts (fatal loop)", cold(func(c *ColdStart) string { return fmt.Sprint(c.Restarts) }))
	row("  max node ID, duplicates", cold(func(c *ColdStart) string { return fmt.Sprintf("%d, %d", c.MaxID, len(c.Duplicates)) }))
	row("  CPU per node (ms)", use(coldU, func(u *Usage) string { return num("%.0f", u.CPUPerNodeMs) }))
	row("  etcd watch events", use(coldU, func(u *Usage) string { return num("%.0f", u.EtcdTotal.WatchEvents) }))
	row("  etcd sent (MiB)", use(coldU, func(u *Usage) string { return num("%.0f", u.EtcdTotal.SentMiB) }))
	row("  etcd CPU (s)", use(coldU, func(u *Usage) string { return num("%.1f", u.EtcdTotal.CPUSeconds) }))
	row("idle: RSS per node (KiB)", use(idleU, func(u *Usage) string { return num("%.0f", u.RSSPerNodeKiB) }))
	row("  Go heap per node (KiB)", use(idleU, func(u *Usage) string { return num("%.0f", u.HeapPerNodeKiB) }))
	row("  CPU per node (ms/s)", use(idleU, func(u *Usage) string { return num("%.2f", u.CPUPerNodeMs/u.Seconds) }))
	row("  process cores, fds", use(idleU, func(u *Usage) string { return fmt.Sprintf("%.2f, %d", u.Cores, u.FDs) }))
	row("  etcd events/s, KiB/s", use(idleU, func(u *Usage) string {
		return fmt.Sprintf("%.0f, %.0f", u.EtcdTotal.WatchEvents/u.Seconds, u.EtcdTotal.SentMiB*1024/u.Seconds)
	}))
	row("  etcd CPU (cores), RSS (MiB)", use(idleU, func(u *Usage) string {
		return fmt.Sprintf("%.2f, %.0f", u.EtcdTotal.CPUSeconds/u.Seconds, u.EtcdTotal.RSSMiB)
	}))
	row("churn: ops (create+delete)", churn(func(c *Churn) string { return fmt.Sprintf("%d+%d", c.Creates, c.Deletes) }))
	row("  pod change p50 / p99 (ms)", churn(func(c *Churn) string {
		return fmt.Sprintf("%.1f / %.1f", c.Latency.P50, c.Latency.P99)
	}))
	row("  max (ms), lost, failed", churn(func(c *Churn) string {
		return fmt.Sprintf("%.0f, %d, %d", c.Latency.Max, c.Lost, c.Failed)
	}))
	row("  invariants broken", churn(func(c *Churn) string { return fmt.Sprint(len(c.Problems)) }))
	row("  etcd events per op", churn(func(c *Churn) string {
		return num("%.1f", c.Usage.EtcdTotal.WatchEvents/float64(max(c.Creates+c.Deletes, 1)))
	}))
	row("  CPU per node (ms/s)", use(churnU, func(u *Usage) string { return num("%.2f", u.CPUPerNodeMs/u.Seconds) }))
	row("replace: nodes replaced", func(r Report) string {
		if r.Replace == nil {
			return "-"
		}
		return fmt.Sprintf("%d (%d errors)", r.Replace.Replaced, len(r.Replace.Errors))
	})
	row("  new node ready p50 / max (ms)", func(r Report) string {
		if r.Replace == nil {
			return "-"
		}
		return fmt.Sprintf("%.0f / %.0f", r.Replace.Ready.P50, r.Replace.Ready.Max)
	})
	row("  max node ID, duplicates", func(r Report) string {
		if r.Replace == nil {
			return "-"
		}
		return fmt.Sprintf("%d, %d", r.Replace.MaxID, len(r.Replace.Duplicates))
	})
	row("kill leader: member, restart (s)", func(r Report) string {
		if r.Kill == nil {
			return "-"
		}
		return fmt.Sprintf("%s, %.1f", r.Kill.Member, r.Kill.RestartMs/1000)
	})
	row("  pod change p99 / max (ms)", func(r Report) string {
		if r.Kill == nil || r.Kill.Churn == nil {
			return "-"
		}
		return fmt.Sprintf("%.0f / %.0f", r.Kill.Churn.Latency.P99, r.Kill.Churn.Latency.Max)
	})
	row("  ksr write p99 / max (ms)", func(r Report) string {
		if r.Kill == nil || r.Kill.Churn == nil {
			return "-"
		}
		return fmt.Sprintf("%.0f / %.0f", r.Kill.Churn.Write.P99, r.Kill.Churn.Write.Max)
	})
	row("  lost, failed, broken, not ready", func(r Report) string {
		if r.Kill == nil || r.Kill.Churn == nil {
			return "-"
		}
		c := r.Kill.Churn
		return fmt.Sprintf("%d, %d, %d, %d", c.Lost, c.Failed, len(c.Problems)+len(r.Kill.IDChanged), len(r.Kill.NotReady))
	})
	row("stopped by", func(r Report) string {
		if r.Failure == "" {
			return "-"
		}
		f := r.Failure
		if len(f) > 60 {
			f = f[:60] + "..."
		}
		return f
	})
	return tw.Flush()
}
