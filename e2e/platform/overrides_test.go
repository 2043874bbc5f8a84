package platform

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/chart/loader"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/ml-platform/ml-platform/shared/charttest"
)

// subjects are the ServiceAccount names the chart's RoleBindings and
// ClusterRoleBindings grant to.
func subjects(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		if o.GetKind() != "RoleBinding" && o.GetKind() != "ClusterRoleBinding" {
			continue
		}
		list, _, _ := unstructured.NestedSlice(o.Object, "subjects")
		for _, s := range list {
			if m := s.(map[string]any); m["kind"] == "ServiceAccount" && !strings.Contains(m["name"].(string), "kubeflow") {
				out = append(out, m["name"].(string))
			}
		}
	}
	return out
}

// TestChartsPlatformOverrides renders every operator chart with the
// overrides a platform team expects of any chart (mlp-lib serves them all):
// names, the ServiceAccount, the security contexts and the Deployment's
// history.
func TestChartsPlatformOverrides(t *testing.T) {
	// Helm merges the values' maps into the chart's defaults: a key the
	// override leaves out keeps its secure default, null removes it.
	podSC := map[string]any{"runAsUser": 1000700000, "fsGroup": 1000700000}
	wantPodSC := map[string]any{"runAsNonRoot": true, "runAsUser": 1000700000.0, "fsGroup": 1000700000.0, "seccompProfile": map[string]any{"type": "RuntimeDefault"}}
	containerSC := map[string]any{"readOnlyRootFilesystem": false, "seccompProfile": nil}
	wantContainerSC := map[string]any{"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": false, "runAsNonRoot": true, "capabilities": map[string]any{"drop": []any{"ALL"}}}
	for _, chart := range operatorCharts {
		t.Run(chart, func(t *testing.T) {
			t.Run("fullnameOverride names every object and subject", func(t *testing.T) {
				objs := objects(t, chartDir(chart), map[string]any{"fullnameOverride": "ops"})
				d := find(t, objs, "Deployment", "ops")
				if d.GetName() != "ops" || find(t, objs, "ServiceAccount", "ops").GetName() != "ops" {
					t.Errorf("Deployment %q, want ops", d.GetName())
				}
				for _, s := range subjects(objs) {
					if s != "ops" {
						t.Errorf("a binding grants to %q, want ops", s)
					}
				}
			})
			t.Run("nameOverride", func(t *testing.T) {
				objs := objects(t, chartDir(chart), map[string]any{"nameOverride": "ops"})
				d := find(t, objs, "Deployment", "-ops")
				if got := d.GetLabels()["app.kubernetes.io/name"]; d.GetName() != release+"-ops" || got != "ops" {
					t.Errorf("Deployment %q with app.kubernetes.io/name %q, want %s-ops and ops", d.GetName(), got, release)
				}
			})
			t.Run("a ServiceAccount the platform team manages", func(t *testing.T) {
				objs := objects(t, chartDir(chart), map[string]any{"serviceAccount": map[string]any{"create": false, "name": "corp-sa"}})
				if n := count(objs, "ServiceAccount"); n != 0 {
					t.Errorf("%d ServiceAccounts rendered with serviceAccount.create=false", n)
				}
				if got := podSpec(t, objs, chart)["serviceAccountName"]; got != "corp-sa" {
					t.Errorf("pod runs as %v, want corp-sa", got)
				}
				if s := subjects(objs); len(s) == 0 || strings.Join(s, ",") != strings.TrimSuffix(strings.Repeat("corp-sa,", len(s)), ",") {
					t.Errorf("bindings grant to %v, want corp-sa", s)
				}
				for _, o := range objs {
					if o.GetKind() == "ValidatingAdmissionPolicy" && strings.Contains(o.GetName(), "owned-objects") && !strings.Contains(toYAML(t, o), ":corp-sa'") {
						t.Errorf("admission policy %s does not recognise the operator as corp-sa", o.GetName())
					}
				}
			})
			t.Run("a named ServiceAccount the chart creates, with annotations", func(t *testing.T) {
				objs := objects(t, chartDir(chart), map[string]any{"serviceAccount": map[string]any{"name": "op", "annotations": map[string]any{"iam.gke.io/gcp-service-account": "op@p.iam"}}})
				sa := find(t, objs, "ServiceAccount", "op")
				if sa.GetName() != "op" || sa.GetAnnotations()["iam.gke.io/gcp-service-account"] != "op@p.iam" || podSpec(t, objs, chart)["serviceAccountName"] != "op" {
					t.Errorf("ServiceAccount %q annotations %v", sa.GetName(), sa.GetAnnotations())
				}
			})
			t.Run("security contexts, history, priority, pod labels and annotations", func(t *testing.T) {
				objs := objects(t, chartDir(chart), map[string]any{
					"podSecurityContext": podSC, "securityContext": containerSC, "revisionHistoryLimit": 3,
					"priorityClassName": "platform-critical", "podLabels": map[string]any{"team": "ml"}, "podAnnotations": map[string]any{"a": "b"},
				})
				pod := podSpec(t, objs, chart)
				if diff := cmp.Diff(wantPodSC, pod["securityContext"]); diff != "" {
					t.Errorf("pod securityContext (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(wantContainerSC, manager(t, objs, chart)["securityContext"]); diff != "" {
					t.Errorf("manager securityContext (-want +got):\n%s", diff)
				}
				d := find(t, objs, "Deployment", chart)
				if got := field(t, d, "spec", "revisionHistoryLimit"); got != 3.0 {
					t.Errorf("revisionHistoryLimit %v, want 3", got)
				}
				tmpl := field(t, d, "spec", "template", "metadata").(map[string]any)
				if pod["priorityClassName"] != "platform-critical" || tmpl["labels"].(map[string]any)["team"] != "ml" || tmpl["annotations"].(map[string]any)["a"] != "b" {
					t.Errorf("pod template %v, priority class %v", tmpl, pod["priorityClassName"])
				}
			})
			t.Run("defaults stay secure", func(t *testing.T) {
				objs := objects(t, chartDir(chart), nil)
				pod := podSpec(t, objs, chart)
				sc := manager(t, objs, chart)["securityContext"].(map[string]any)
				if pod["securityContext"].(map[string]any)["runAsNonRoot"] != true || sc["readOnlyRootFilesystem"] != true || sc["allowPrivilegeEscalation"] != false {
					t.Errorf("default security contexts %v / %v", pod["securityContext"], sc)
				}
				if pod["serviceAccountName"] != find(t, objs, "ServiceAccount", chart).GetName() {
					t.Errorf("pod runs as %v, not the chart's ServiceAccount", pod["serviceAccountName"])
				}
			})
		})
	}
}

func toYAML(t *testing.T, o *unstructured.Unstructured) string {
	t.Helper()
	b, err := o.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestTrainingJobChartPullsNoPublicImage: the init containers the chart
// gives the Kubeflow training-operator are images the project builds, the
// busybox and the MPI image at its tag, not images of a public registry
// (alpine:3.10 was, and is end of life; kubeflow/kubectl-delivery:latest
// was, a moving tag), under registry-neutral names that
// global.imageRegistry prefixes, as it does the operator images (the kind
// node's name was the default before).
func TestTrainingJobChartPullsNoPublicImage(t *testing.T) {
	for name, tc := range map[string]struct {
		global    map[string]any
		want, mpi string
	}{
		"default":                 {want: "ml-platform/busybox:1.35.0-4-deb12u1-b1", mpi: "ml-platform/mpi:4.1"},
		"global.imageRegistry":    {global: map[string]any{"imageRegistry": "registry.example/"}, want: "registry.example/ml-platform/busybox:1.35.0-4-deb12u1-b1", mpi: "registry.example/ml-platform/mpi:4.1"},
		"no global.imageRegistry": {global: map[string]any{"imageRegistry": ""}, want: "ml-platform/busybox:1.35.0-4-deb12u1-b1", mpi: "ml-platform/mpi:4.1"},
	} {
		t.Run(name, func(t *testing.T) {
			values := map[string]any{"kubeflow": map[string]any{"enabled": true}}
			if tc.global != nil {
				values["global"] = tc.global
			}
			objs := objects(t, chartDir("trainingjob-operator"), values)
			args := strs(find(t, objs, "Deployment", "-kubeflow").Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["args"])
			if !contains(args, "--pytorch-init-container-image="+tc.want) {
				t.Errorf("args %v lack --pytorch-init-container-image=%s", args, tc.want)
			}
			if !contains(args, "--mpi-kubectl-delivery-image="+tc.mpi) {
				t.Errorf("args %v lack --mpi-kubectl-delivery-image=%s", args, tc.mpi)
			}
		})
	}
}

// TestTrainingJobNotesAndDescriptionMatchTheBackends: the default native
// backend needs no Kubeflow, which the notes say only when the default is
// kubeflow; they wait on Finished, which a failed job also reaches.
func TestTrainingJobNotesAndDescriptionMatchTheBackends(t *testing.T) {
	chart := chartDir("trainingjob-operator")
	notes, err := charttest.Notes(chart, release, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(notes, "It needs the Kubeflow") || !strings.Contains(notes, "needs no other operator") ||
		!strings.Contains(notes, "--for=condition=Finished") || strings.Contains(notes, "--for=condition=Succeeded") {
		t.Errorf("notes with the default backend:\n%s", notes)
	}
	notes, err = charttest.Notes(chart, release, ns, map[string]any{"defaultBackend": "kubeflow"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(notes, "needs the\nKubeflow training-operator") {
		t.Errorf("notes with defaultBackend=kubeflow do not say it needs Kubeflow:\n%s", notes)
	}
	c, err := loader.Load(chart)
	if err != nil {
		t.Fatal(err)
	}
	if d := c.Metadata.Description; !strings.Contains(d, "native") {
		t.Errorf("Chart.yaml describes the operator as running on Kubeflow only: %q", d)
	}
}

// TestMonitoringUmbrellaSwitchAndRunbooks: global.monitoring.enabled turns
// on the ServiceMonitor, PrometheusRule and dashboards of every operator;
// every alert links its runbook, a section of docs/runbooks.md; the
// operators' own alerts honour their for override.
func TestMonitoringUmbrellaSwitchAndRunbooks(t *testing.T) {
	objs := objects(t, umbrella, map[string]any{"global": map[string]any{"monitoring": map[string]any{"enabled": true}}})
	for kind, want := range map[string]int{"ServiceMonitor": 3, "PrometheusRule": 3} {
		if n := count(objs, kind); n != want {
			t.Errorf("%d %ss with global.monitoring.enabled, want %d", n, kind, want)
		}
	}
	dashboards := 0
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" && strings.HasSuffix(o.GetName(), "-dashboards") {
			dashboards++
		}
	}
	if dashboards != 3 {
		t.Errorf("%d dashboard ConfigMaps, want 3", dashboards)
	}
	if n := count(objects(t, umbrella, nil), "PrometheusRule"); n != 0 {
		t.Errorf("%d PrometheusRules by default, want none", n)
	}

	runbooks, err := os.ReadFile(filepath.Join(repoRoot, "docs", "runbooks.md"))
	if err != nil {
		t.Fatal(err)
	}
	const base = "https://github.com/ml-platform/ml-platform/blob/main/docs/runbooks.md#"
	alerts := 0
	for _, o := range objs {
		if o.GetKind() != "PrometheusRule" {
			continue
		}
		groups, _, _ := unstructured.NestedSlice(o.Object, "spec", "groups")
		for _, g := range groups {
			for _, r := range g.(map[string]any)["rules"].([]any) {
				rule := r.(map[string]any)
				name := rule["alert"].(string)
				alerts++
				url, _ := rule["annotations"].(map[string]any)["runbook_url"].(string)
				if url != base+strings.ToLower(name) {
					t.Errorf("%s: runbook_url %q, want %s%s", name, url, base, strings.ToLower(name))
				}
				if !strings.Contains(string(runbooks), "\n## "+name+"\n") {
					t.Errorf("docs/runbooks.md has no section for %s", name)
				}
			}
		}
	}
	if alerts < 9 {
		t.Errorf("%d alerts rendered, want every operator's", alerts)
	}

	for chart, key := range map[string]string{
		"featurestore-operator": "featureStoreCleanupFailing", "notebook-operator": "notebookProbesFailing", "trainingjob-operator": "trainingJobsQueuedLong",
	} {
		rule := find(t, objects(t, chartDir(chart), map[string]any{"monitoring": map[string]any{"prometheusRule": map[string]any{
			"enabled": true, "for": map[string]any{key: "42m"},
		}}}), "PrometheusRule", chart)
		if !strings.Contains(toYAML(t, rule), `"for":"42m"`) {
			t.Errorf("%s: for.%s=42m not honoured", chart, key)
		}
	}
}
