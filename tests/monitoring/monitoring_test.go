package monitoring

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"
)

// monitoringDir is k8s/monitoring of this checkout.
func monitoringDir(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "k8s", "monitoring")
}

var (
	alertsFile    = "contiv-alerts.yaml"
	dashboardFile = "contiv-dashboard.json"
)

// check returns one line per metric name an expression uses that the code
// does not export (or uses with a suffix its type does not have).
func check(exprs []Expr, exp exported) []string {
	var bad []string
	for _, e := range exprs {
		names, err := MetricNames(e.PromQL)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", e.Where, err))
			continue
		}
		for _, n := range names {
			if err := exp.check(n); err != nil {
				bad = append(bad, fmt.Sprintf("%s: %v", e.Where, err))
			}
		}
	}
	return bad
}

// check tells whether name selects series the code exports: a described
// metric (not a histogram's own name, which has no series), or a
// histogram's _bucket, _sum, _count, or a summary's _sum, _count.
func (e exported) check(name string) error {
	if kind, ok := e[name]; ok {
		if kind == kindHistogram {
			return fmt.Errorf("%s is a histogram: select %s_bucket, %s_sum or %s_count", name, name, name, name)
		}
		return nil
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		kind, ok := e[base]
		switch {
		case !ok:
		case kind == kindHistogram, kind == kindSummary && suffix != "_bucket":
			return nil
		case kind == kindUnknown:
			return fmt.Errorf("%s: the type of %s is unknown (a vector without children collects nothing): give it its label values at construction", name, base)
		default:
			return fmt.Errorf("%s: %s is neither a histogram nor a summary", name, base)
		}
	}
	return fmt.Errorf("%s is not exported by contiv-agent or contiv-ksr", name)
}

func TestAlertsNameExportedMetrics(t *testing.T) {
	g := NewWithT(t)
	rules, err := LoadRules(filepath.Join(monitoringDir(t), alertsFile))
	g.Expect(err).NotTo(HaveOccurred())
	exprs := rules.Exprs()
	g.Expect(exprs).NotTo(BeEmpty())
	g.Expect(check(exprs, exportedMetrics(t))).To(BeEmpty())
}

func TestDashboardNamesExportedMetrics(t *testing.T) {
	g := NewWithT(t)
	d, err := LoadDashboard(filepath.Join(monitoringDir(t), dashboardFile))
	g.Expect(err).NotTo(HaveOccurred())
	exprs, err := d.Exprs()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(exprs)).To(BeNumerically(">", 20))
	g.Expect(check(exprs, exportedMetrics(t))).To(BeEmpty())
}

// A copy of the dashboard, and of the rules, with one metric renamed is
// reported, naming the panel (or alert) and the unknown name; a histogram
// selected by its own name, and a _bucket of a gauge, are reported too.
func TestARenamedMetricIsReported(t *testing.T) {
	exp := exportedMetrics(t)
	dir := monitoringDir(t)
	for _, tc := range []struct {
		name, file, old, new string
		want                 []string
	}{
		{"dashboard gauge", dashboardFile, "contiv_ipam_release_candidates{", "contiv_ipam_release_candidate{",
			[]string{`panel "Release candidates" query A: contiv_ipam_release_candidate is not exported`}},
		{"dashboard variable", dashboardFile, "label_values(contiv_ipam_pod_ip_pool_size, node)", "label_values(contiv_ipam_pod_ip_pools_size, node)",
			[]string{"variable node: contiv_ipam_pod_ip_pools_size is not exported"}},
		{"dashboard histogram by its own name", dashboardFile, "contiv_podmanager_request_duration_seconds_bucket{node", "contiv_podmanager_request_duration_seconds{node",
			[]string{"is a histogram: select contiv_podmanager_request_duration_seconds_bucket"}},
		{"dashboard bucket of a gauge", dashboardFile, "contiv_ipam_release_candidates{", "contiv_ipam_release_candidates_bucket{",
			[]string{"contiv_ipam_release_candidates_bucket: contiv_ipam_release_candidates is neither a histogram nor a summary"}},
		{"alert counter", alertsFile, "contiv_ipam_store_failures_total[", "contiv_ipam_store_failure_total[",
			[]string{"alert ContivDurableWriteFailures: contiv_ipam_store_failure_total is not exported"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			data, err := os.ReadFile(filepath.Join(dir, tc.file))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(strings.Count(string(data), tc.old)).To(BeNumerically(">", 0), "the mutation applies")
			mutated := filepath.Join(t.TempDir(), tc.file)
			// Rename in the first place only, so the report names one place.
			g.Expect(os.WriteFile(mutated, []byte(strings.Replace(string(data), tc.old, tc.new, 1)), 0o644)).To(Succeed())
			var exprs []Expr
			if tc.file == dashboardFile {
				d, err := LoadDashboard(mutated)
				g.Expect(err).NotTo(HaveOccurred())
				exprs, err = d.Exprs()
				g.Expect(err).NotTo(HaveOccurred())
			} else {
				rules, err := LoadRules(mutated)
				g.Expect(err).NotTo(HaveOccurred())
				exprs = rules.Exprs()
			}
			bad := check(exprs, exp)
			g.Expect(bad).To(HaveLen(len(tc.want)), "%q", bad)
			for i, w := range tc.want {
				g.Expect(bad[i]).To(ContainSubstring(w))
			}
		})
	}
}

// Every alert has a severity (label, for routing, and annotation, the
// same), a summary, a description and a runbook in docs/operations.md
// anchored by its name in lower case.
func TestAlertsHaveRunbooks(t *testing.T) {
	g := NewWithT(t)
	rules, err := LoadRules(filepath.Join(monitoringDir(t), alertsFile))
	g.Expect(err).NotTo(HaveOccurred())
	seen := map[string]bool{}
	for _, grp := range rules.Groups {
		for _, r := range grp.Rules {
			g.Expect(r.Alert).NotTo(BeEmpty(), "rule %q is an alert", r.Expr)
			g.Expect(seen[r.Alert]).To(BeFalse(), "alert %s defined once", r.Alert)
			seen[r.Alert] = true
			g.Expect(r.Labels).To(HaveKeyWithValue("severity", BeElementOf("warning", "critical")), r.Alert)
			g.Expect(r.Annotations).To(HaveKeyWithValue("severity", r.Labels["severity"]), r.Alert)
			g.Expect(r.Annotations).To(HaveKeyWithValue("summary", Not(BeEmpty())), r.Alert)
			g.Expect(r.Annotations).To(HaveKeyWithValue("description", Not(BeEmpty())), r.Alert)
			g.Expect(r.Annotations).To(HaveKeyWithValue("runbook_url",
				HaveSuffix("/docs/operations.md#"+strings.ToLower(r.Alert))), r.Alert)
		}
	}
	g.Expect(seen).To(HaveLen(7))
}

// The dashboard is a current Grafana dashboard with a data source and a
// node variable, every panel on that data source, and it shows every
// metric the alerts use.
func TestDashboardShape(t *testing.T) {
	g := NewWithT(t)
	dir := monitoringDir(t)
	d, err := LoadDashboard(filepath.Join(dir, dashboardFile))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.SchemaVersion).To(BeNumerically(">=", 36))
	g.Expect(d.UID).NotTo(BeEmpty())
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	g.Expect(vars).To(HaveKeyWithValue("datasource", "datasource"))
	g.Expect(vars).To(HaveKeyWithValue("node", "query"))
	ids := map[int]bool{}
	for _, p := range d.AllPanels() {
		g.Expect(ids[p.ID]).To(BeFalse(), "panel id %d is unique", p.ID)
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		g.Expect(p.Targets).NotTo(BeEmpty(), "panel %q has queries", p.Title)
		g.Expect(string(p.Datasource)).To(ContainSubstring(`"${datasource}"`), "panel %q uses the data source variable", p.Title)
	}

	exprs, err := d.Exprs()
	g.Expect(err).NotTo(HaveOccurred())
	shown := map[string]bool{}
	for _, e := range exprs {
		names, err := MetricNames(e.PromQL)
		g.Expect(err).NotTo(HaveOccurred())
		for _, n := range names {
			shown[n] = true
		}
	}
	rules, err := LoadRules(filepath.Join(dir, alertsFile))
	g.Expect(err).NotTo(HaveOccurred())
	var missing []string
	for _, e := range rules.Exprs() {
		names, err := MetricNames(e.PromQL)
		g.Expect(err).NotTo(HaveOccurred())
		for _, n := range names {
			if !shown[n] {
				missing = append(missing, e.Where+": "+n)
			}
		}
	}
	g.Expect(missing).To(BeEmpty(), "metrics of the alerts the dashboard does not show")
}

// Every alert has promtool unit tests in k8s/monitoring/tests: a case
// where it fires and one where it must not.
func TestEveryAlertHasFiringAndSilentCases(t *testing.T) {
	g := NewWithT(t)
	dir := monitoringDir(t)
	rules, err := LoadRules(filepath.Join(dir, alertsFile))
	g.Expect(err).NotTo(HaveOccurred())
	files, err := filepath.Glob(filepath.Join(dir, "tests", "*.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files).NotTo(BeEmpty())
	type unitTests struct {
		RuleFiles []string `json:"rule_files"`
		Tests     []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		g.Expect(err).NotTo(HaveOccurred())
		var u unitTests
		g.Expect(yaml.Unmarshal(data, &u)).To(Succeed(), f)
		g.Expect(u.RuleFiles).To(ContainElement("../"+alertsFile), f)
		for _, tc := range u.Tests {
			for _, a := range tc.AlertRuleTest {
				if len(a.ExpAlerts) > 0 {
					fires[a.Alertname] = true
				} else {
					silent[a.Alertname] = true
				}
			}
		}
	}
	var alerts []string
	for _, grp := range rules.Groups {
		for _, r := range grp.Rules {
			alerts = append(alerts, r.Alert)
		}
	}
	sort.Strings(alerts)
	for _, a := range alerts {
		g.Expect(fires).To(HaveKey(a), "a case where %s fires", a)
		g.Expect(silent).To(HaveKey(a), "a case where %s must not fire", a)
	}
}
