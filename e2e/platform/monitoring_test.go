package platform

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// promtool builds (once, then reuses) the promtool pinned in tools/promtool.
func promtool(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(repoRoot, "hack", "promtool.sh")).Output()
	if err != nil {
		t.Fatalf("building promtool: %v", err)
	}
	return strings.TrimSpace(string(out))
}

type rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

type ruleGroups struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []rule `json:"rules"`
	} `json:"groups"`
}

// renderRules renders the chart's PrometheusRule and returns its spec as a
// Prometheus rule file and the rules by alert name.
func renderRules(t *testing.T, chart string, values map[string]any) (string, map[string]rule) {
	t.Helper()
	objs := objects(t, chartDir(chart), values)
	pr := find(t, objs, "PrometheusRule", chart)
	spec, err := yaml.Marshal(field(t, pr, "spec"))
	if err != nil {
		t.Fatal(err)
	}
	var groups ruleGroups
	if err := yaml.Unmarshal(spec, &groups); err != nil {
		t.Fatal(err)
	}
	rules := map[string]rule{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			rules[r.Alert] = r
		}
	}
	return string(spec), rules
}

// series is one input series of a rule unit test.
type series struct{ Series, Values string }

// alertCase says which alert a set of series fires (alert labels beyond
// severity and operator) or, with fires false, that it stays silent.
type alertCase struct {
	alert  string
	input  []series
	at     string
	labels map[string]string
	fires  bool
}

func monitoringCases(job string) map[string][]alertCase {
	j := `job="` + job + `"`
	common := []alertCase{
		{alert: "MLPlatformOperatorDown", input: []series{{`up{` + j + `,namespace="mlp-system"}`, "0x10"}}, at: "6m", fires: true},
		{alert: "MLPlatformOperatorDown", input: []series{{`up{job="another-operator-metrics"}`, "1x10"}}, at: "6m", fires: true},
		{alert: "MLPlatformOperatorDown", input: []series{{`up{` + j + `,namespace="mlp-system"}`, "1x10"}}, at: "6m"},
		{alert: "MLPlatformOperatorNoLeader", input: []series{{`leader_election_master_status{` + j + `,name="x"}`, "0x10"}}, at: "6m", fires: true},
		{alert: "MLPlatformOperatorNoLeader", input: []series{{`leader_election_master_status{` + j + `,name="x",pod="a"}`, "0x10"}, {`leader_election_master_status{` + j + `,name="x",pod="b"}`, "1x10"}}, at: "6m"},
		{alert: "MLPlatformReconcileErrors", input: []series{
			{`controller_runtime_reconcile_errors_total{` + j + `,controller="c"}`, "0+5x40"},
			{`controller_runtime_reconcile_total{` + j + `,controller="c"}`, "0+10x40"},
		}, at: "35m", labels: map[string]string{"controller": "c"}, fires: true},
		{alert: "MLPlatformReconcileErrors", input: []series{
			{`controller_runtime_reconcile_errors_total{` + j + `,controller="c"}`, "0+0x40"},
			{`controller_runtime_reconcile_total{` + j + `,controller="c"}`, "0+10x40"},
		}, at: "35m"},
		// Another release's errors never alert for this one.
		{alert: "MLPlatformReconcileErrors", input: []series{
			{`controller_runtime_reconcile_errors_total{job="other-metrics",controller="c"}`, "0+5x40"},
			{`controller_runtime_reconcile_total{job="other-metrics",controller="c"}`, "0+10x40"},
		}, at: "35m"},
		// With honorLabels the object's namespace is the metric's.
		{alert: "MLPlatformObjectsStalled", input: []series{{`mlplatform_objects_stalled{` + j + `,kind="K",namespace="team-a"}`, "1x30"}}, at: "20m", labels: map[string]string{"kind": "K", "namespace": "team-a"}, fires: true},
		{alert: "MLPlatformObjectsStalled", input: []series{{`mlplatform_objects_stalled{` + j + `,kind="K",namespace="team-a"}`, "1x10 0x20"}}, at: "20m"},
		{alert: "MLPlatformCleanupFailing", input: []series{{`mlplatform_finalizer_cleanup_failures_total{` + j + `,finalizer="f"}`, "0+1x60"}}, at: "50m", labels: map[string]string{"finalizer": "f"}, fires: true},
		{alert: "MLPlatformCleanupFailing", input: []series{{`mlplatform_finalizer_cleanup_failures_total{` + j + `,finalizer="f"}`, "0+1x10 10x50"}}, at: "50m"},
	}
	buckets := func(le, values string) series {
		return series{`mlplatform_trainingjob_queue_wait_seconds_bucket{` + j + `,namespace="team-a",le="` + le + `"}`, values}
	}
	exhausted := func(ns, values string) series {
		return series{`mlplatform_trainingjob_restarts_exhausted_total{` + j + `,namespace="` + ns + `"}`, values}
	}
	return map[string][]alertCase{
		"trainingjob-operator": append(common,
			alertCase{alert: "MLPlatformTrainingJobsQueuedLong", input: []series{buckets("600", "0x120"), buckets("7200", "0+1x120"), buckets("+Inf", "0+1x120")}, at: "90m", labels: map[string]string{"namespace": "team-a"}, fires: true},
			alertCase{alert: "MLPlatformTrainingJobsQueuedLong", input: []series{buckets("600", "0+1x120"), buckets("7200", "0+1x120"), buckets("+Inf", "0+1x120")}, at: "90m"},
			alertCase{alert: "MLPlatformTrainingJobRestartsExhausted", input: []series{exhausted("team-a", "0+1x60")}, at: "60m", labels: map[string]string{"namespace": "team-a"}, fires: true},
			// The namespace's first exhaustion creates the series at 1,
			// which increase() alone does not see.
			alertCase{alert: "MLPlatformTrainingJobRestartsExhausted", input: []series{exhausted("team-a", "_x30 1x30")}, at: "50m", labels: map[string]string{"namespace": "team-a"}, fires: true},
			alertCase{alert: "MLPlatformTrainingJobRestartsExhausted", input: []series{exhausted("team-a", "1x120")}, at: "90m"},
			// Restarts and failures that are not restarts running out
			// (a user error) do not page.
			alertCase{alert: "MLPlatformTrainingJobRestartsExhausted", input: []series{
				{`mlplatform_trainingjob_restarted_total{` + j + `,namespace="team-a",class="Infrastructure",reason="NodeFailure"}`, "0+1x60"},
				{`mlplatform_trainingjob_failed_total{` + j + `,namespace="team-a",framework="pytorch"}`, "0+1x60"},
			}, at: "60m"},
		),
		"notebook-operator": append(common,
			alertCase{alert: "MLPlatformNotebookProbesFailing", input: []series{
				{`mlplatform_notebook_probe_failures_total{` + j + `,reason="timeout"}`, "0+6x40"},
				{`mlplatform_notebook_probe_duration_seconds_count{` + j + `,result="error"}`, "0+10x40"},
			}, at: "35m", fires: true},
			alertCase{alert: "MLPlatformNotebookProbesFailing", input: []series{
				{`mlplatform_notebook_probe_failures_total{` + j + `,reason="timeout"}`, "0+1x40"},
				{`mlplatform_notebook_probe_duration_seconds_count{` + j + `,result="ok"}`, "0+10x40"},
			}, at: "35m"},
		),
		"featurestore-operator": append(common,
			alertCase{alert: "MLPlatformFeatureStoreCleanupFailing", input: []series{{`mlplatform_featurestore_cleanup_failures_total{` + j + `,origin="featurestore"}`, "0+1x60"}}, at: "50m", labels: map[string]string{"origin": "featurestore"}, fires: true},
			alertCase{alert: "MLPlatformFeatureStoreCleanupFailing", input: []series{{`mlplatform_featurestore_cleanup_failures_total{` + j + `,origin="featurestore"}`, "0x60"}}, at: "50m"},
		),
	}
}

// expand fills an annotation template's $labels as Prometheus would.
func expand(tpl string, labels map[string]string) string {
	for k, v := range labels {
		tpl = strings.ReplaceAll(tpl, "{{ $labels."+k+" }}", v)
	}
	return tpl
}

// TestAlertsWithPromtool checks every operator's PrometheusRule with
// promtool: the rules parse, and unit tests fire each alert on the series
// it is for and keep it silent otherwise.
func TestAlertsWithPromtool(t *testing.T) {
	bin := promtool(t)
	for chart, cases := range monitoringCases("") {
		t.Run(chart, func(t *testing.T) {
			job := release + "-" + chart + "-metrics"
			cases = monitoringCases(job)[chart]
			spec, rules := renderRules(t, chart, map[string]any{"monitoring": map[string]any{"prometheusRule": map[string]any{"enabled": true}}})
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(spec), 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(bin, "check", "rules", filepath.Join(dir, "rules.yaml")).CombinedOutput(); err != nil {
				t.Fatalf("promtool check rules: %v\n%s", err, out)
			}
			var tests []any
			tested := map[string]bool{}
			for _, tc := range cases {
				r, ok := rules[tc.alert]
				if !ok {
					t.Fatalf("no alert %s", tc.alert)
				}
				tested[tc.alert] = true
				var exp []any
				if tc.fires {
					labels := map[string]string{}
					for k, v := range r.Labels {
						labels[k] = v
					}
					for k, v := range tc.labels {
						labels[k] = v
					}
					ann := map[string]string{}
					for k, v := range r.Annotations {
						ann[k] = expand(v, labels)
					}
					exp = append(exp, map[string]any{"exp_labels": labels, "exp_annotations": ann})
				}
				var input []any
				for _, s := range tc.input {
					input = append(input, map[string]any{"series": s.Series, "values": s.Values})
				}
				tests = append(tests, map[string]any{
					"interval":        "1m",
					"input_series":    input,
					"alert_rule_test": []any{map[string]any{"eval_time": tc.at, "alertname": tc.alert, "exp_alerts": exp}},
				})
			}
			for name := range rules {
				if !tested[name] {
					t.Errorf("alert %s has no unit test", name)
				}
			}
			b, err := yaml.Marshal(map[string]any{"rule_files": []string{"rules.yaml"}, "evaluation_interval": "1m", "tests": tests})
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "rules_test.yaml"), b, 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(bin, "test", "rules", filepath.Join(dir, "rules_test.yaml")).CombinedOutput(); err != nil {
				t.Fatalf("promtool test rules: %v\n%s", err, out)
			}
		})
	}
}
