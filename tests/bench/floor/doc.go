// Package floor measures what bounds a durable allocation on this machine:
// the latency of one fdatasync of a freshly written 4 KiB page, in a file
// in the directory the agent's bolt file would live in (TMPDIR, as the
// benchmarks' agents use t.TempDir). A bolt commit makes two of them (the
// data pages, then the meta page), so the durable scenario's p50 cannot go
// below about twice this floor's p50.
//
// Each op writes 4 KiB at the next page of a 4 MiB file (wrapping) and
// calls fdatasync; "p50-ms" and "p99-ms" are the nearest-rank percentiles
// of the ops of one run.
package floor
