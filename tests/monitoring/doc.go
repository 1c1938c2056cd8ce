// Package monitoring checks k8s/monitoring against the code: every metric
// that an alerting rule (contiv-alerts.yaml) or a dashboard panel
// (contiv-dashboard.json) names must be one that contiv-agent or contiv-ksr
// exports. A renamed or removed metric then fails `go test ./...` instead
// of leaving an alert that never fires or a panel that shows "No data".
//
// What the tests do, in order:
//  1. Build the plugins of contiv-agent and contiv-ksr as their binaries
//     wire them (cmd/contiv-agent, cmd/contiv-ksr), each with a registry
//     that records the collectors its Init registers, and ask every
//     collector to Describe itself: the exported names come from the code,
//     including vectors that have no child yet (a scrape would miss them).
//     Collect adds the type where a sample exists, so that name_bucket,
//     name_sum and name_count are accepted only for histograms (and
//     summaries).
//  2. Extract the metric names of every PromQL expression with MetricNames,
//     a tokenizer that knows PromQL's functions, aggregations, keywords,
//     label matchers, ranges, strings and Grafana's $variables.
//  3. Report every name the code does not export, with where it is used.
//
// # Owners
//
// The monitoring work owns this package and k8s/monitoring. A plugin that
// adds a collector registered by its Init is seen without a change here; a
// new plugin with metrics must be added to the wiring in exported_test.go
// (the test fails, naming the metric, until it is).
package monitoring
