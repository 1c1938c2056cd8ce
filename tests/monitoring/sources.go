package monitoring

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"
)

// Expr is one PromQL expression of k8s/monitoring and where it is.
type Expr struct {
	Where  string // "alert X", "panel \"T\" query A", "variable node"
	PromQL string
}

// RuleFile is a Prometheus rules file (the spec of a PrometheusRule).
type RuleFile struct {
	Groups []RuleGroup `json:"groups"`
}

// RuleGroup is a group of rules.
type RuleGroup struct {
	Name  string `json:"name"`
	Rules []Rule `json:"rules"`
}

// Rule is an alerting or a recording rule.
type Rule struct {
	Alert       string            `json:"alert"`
	Record      string            `json:"record"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// LoadRules reads a rules file strictly (an unknown key is an error).
func LoadRules(path string) (RuleFile, error) {
	var f RuleFile
	data, err := os.ReadFile(path)
	if err != nil {
		return f, err
	}
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return f, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// Exprs lists the expressions of the rules.
func (f RuleFile) Exprs() []Expr {
	var out []Expr
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			name := "alert " + r.Alert
			if r.Record != "" {
				name = "record " + r.Record
			}
			out = append(out, Expr{Where: name, PromQL: r.Expr})
		}
	}
	return out
}

// Dashboard is the part of a Grafana dashboard the checks read.
type Dashboard struct {
	Title         string  `json:"title"`
	UID           string  `json:"uid"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []Panel `json:"panels"`
	Templating    struct {
		List []Variable `json:"list"`
	} `json:"templating"`
}

// Panel is a dashboard panel; a row holds its panels when collapsed.
type Panel struct {
	ID         int             `json:"id"`
	Type       string          `json:"type"`
	Title      string          `json:"title"`
	Datasource json.RawMessage `json:"datasource"`
	Targets    []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []Panel `json:"panels"`
}

// Variable is a template variable; Query is a string or an object with a
// "query" field, depending on Grafana's version.
type Variable struct {
	Name  string          `json:"name"`
	Type  string          `json:"type"`
	Query json.RawMessage `json:"query"`
}

// LoadDashboard reads a dashboard's JSON.
func LoadDashboard(path string) (Dashboard, error) {
	var d Dashboard
	data, err := os.ReadFile(path)
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return d, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

// AllPanels lists every panel, those inside rows included.
func (d Dashboard) AllPanels() []Panel {
	var out []Panel
	var walk func([]Panel)
	walk = func(ps []Panel) {
		for _, p := range ps {
			out = append(out, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// labelValues matches Grafana's label_values(expr, label) and
// label_values(label).
var labelValues = regexp.MustCompile(`^\s*label_values\((.*?)\s*(?:,\s*[A-Za-z_][A-Za-z0-9_]*\s*)?\)\s*$`)

// Exprs lists the PromQL of every panel target and query variable. A
// variable's label_values(expr, label) contributes expr (a lone label
// contributes nothing); query_result(expr) contributes expr.
func (d Dashboard) Exprs() ([]Expr, error) {
	var out []Expr
	for _, p := range d.AllPanels() {
		for _, t := range p.Targets {
			if strings.TrimSpace(t.Expr) == "" {
				continue
			}
			out = append(out, Expr{Where: fmt.Sprintf("panel %q query %s", p.Title, t.RefID), PromQL: t.Expr})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, err := variableQuery(v.Query)
		if err != nil {
			return nil, fmt.Errorf("variable %s: %w", v.Name, err)
		}
		switch m := labelValues.FindStringSubmatch(q); {
		case m != nil && strings.Contains(q, ","):
			out = append(out, Expr{Where: "variable " + v.Name, PromQL: m[1]})
		case m != nil: // label_values(label): every series, no metric
		case strings.HasPrefix(strings.TrimSpace(q), "query_result("):
			inner := strings.TrimSpace(q)
			inner = strings.TrimSuffix(strings.TrimPrefix(inner, "query_result("), ")")
			out = append(out, Expr{Where: "variable " + v.Name, PromQL: inner})
		default:
			return nil, fmt.Errorf("variable %s: query %q is neither label_values nor query_result", v.Name, q)
		}
	}
	return out, nil
}

func variableQuery(raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var o struct {
		Query string `json:"query"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return "", fmt.Errorf("query %s: %w", raw, err)
	}
	return o.Query, nil
}
