package platform

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/ml-platform/ml-platform/shared/charttest"
)

const (
	repoRoot = "../.."
	release  = "ml-platform"
	ns       = "mlp-system"
)

var (
	umbrella       = filepath.Join(repoRoot, "charts", "ml-platform")
	operatorCharts = []string{"trainingjob-operator", "notebook-operator", "featurestore-operator"}
)

func chartDir(name string) string { return filepath.Join(repoRoot, "charts", name) }

// objects renders a chart and decodes every manifest.
func objects(t *testing.T, chart string, values map[string]any) []*unstructured.Unstructured {
	t.Helper()
	manifest, err := charttest.Render(chart, release, ns, values)
	if err != nil {
		t.Fatalf("rendering %s: %v", chart, err)
	}
	var out []*unstructured.Unstructured
	for _, doc := range charttest.Documents(manifest) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatalf("decoding %q: %v", doc, err)
		}
		if u.Object != nil {
			out = append(out, u)
		}
	}
	return out
}

// find returns the one object of the kind whose name ends in suffix.
func find(t *testing.T, objs []*unstructured.Unstructured, kind, suffix string) *unstructured.Unstructured {
	t.Helper()
	var hits []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind && strings.HasSuffix(o.GetName(), suffix) {
			hits = append(hits, o)
		}
	}
	if len(hits) != 1 {
		t.Fatalf("%d objects of kind %s named *%s, want 1", len(hits), kind, suffix)
	}
	return hits[0]
}

func count(objs []*unstructured.Unstructured, kind string) int {
	n := 0
	for _, o := range objs {
		if o.GetKind() == kind {
			n++
		}
	}
	return n
}

// field reads a nested field, failing the test when it is absent.
func field(t *testing.T, o *unstructured.Unstructured, path ...string) any {
	t.Helper()
	v, ok, err := unstructured.NestedFieldNoCopy(o.Object, path...)
	if err != nil || !ok {
		t.Fatalf("%s %s has no %s (%v)", o.GetKind(), o.GetName(), strings.Join(path, "."), err)
	}
	return v
}

func podSpec(t *testing.T, objs []*unstructured.Unstructured, chart string) map[string]any {
	t.Helper()
	return field(t, find(t, objs, "Deployment", chart), "spec", "template", "spec").(map[string]any)
}

func manager(t *testing.T, objs []*unstructured.Unstructured, chart string) map[string]any {
	t.Helper()
	for _, c := range podSpec(t, objs, chart)["containers"].([]any) {
		if c.(map[string]any)["name"] == "manager" {
			return c.(map[string]any)
		}
	}
	t.Fatalf("%s has no manager container", chart)
	return nil
}

func strs(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, fmt.Sprint(x))
	}
	return out
}

func names(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, fmt.Sprint(x.(map[string]any)["name"]))
	}
	return out
}

func contains(list []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, s := range list {
			found = found || s == w
		}
		if !found {
			return false
		}
	}
	return true
}

// TestChartsEscapeHatches renders every operator chart with each escape
// hatch set and checks it reaches the object it is for.
func TestChartsEscapeHatches(t *testing.T) {
	const digest = "sha256:4bcff63911fcb4448bd4fdacec207030997caf25e9bea4045fa6c8c44de311d1"
	for _, chart := range operatorCharts {
		for name, tc := range map[string]struct {
			values map[string]any
			check  func(t *testing.T, objs []*unstructured.Unstructured)
		}{
			"extra args come after the chart's flags": {
				values: map[string]any{"extraArgs": []any{"--max-backoff=2m"}},
				check: func(t *testing.T, objs []*unstructured.Unstructured) {
					args := strs(manager(t, objs, chart)["args"])
					if args[len(args)-1] != "--max-backoff=2m" {
						t.Errorf("args %v, want --max-backoff=2m last", args)
					}
				},
			},
			"extra env, volumes and mounts": {
				values: map[string]any{
					"extraEnv":     []any{map[string]any{"name": "HTTPS_PROXY", "value": "http://proxy:3128"}},
					"volumes":      []any{map[string]any{"name": "ca", "configMap": map[string]any{"name": "corp-ca"}}},
					"volumeMounts": []any{map[string]any{"name": "ca", "mountPath": "/etc/ssl/corp"}},
				},
				check: func(t *testing.T, objs []*unstructured.Unstructured) {
					m := manager(t, objs, chart)
					if !contains(names(m["env"]), "POD_NAMESPACE", "HTTPS_PROXY") {
						t.Errorf("env %v", m["env"])
					}
					if !contains(names(m["volumeMounts"]), "ca") || !contains(names(podSpec(t, objs, chart)["volumes"]), "ca") {
						t.Errorf("volume ca not mounted: %v / %v", m["volumeMounts"], podSpec(t, objs, chart)["volumes"])
					}
				},
			},
			"common labels and annotations on every object": {
				values: map[string]any{"commonLabels": map[string]any{"team": "platform"}, "commonAnnotations": map[string]any{"owner": "ops@example.com"}},
				check: func(t *testing.T, objs []*unstructured.Unstructured) {
					for _, o := range objs {
						if o.GetLabels()["team"] != "platform" {
							t.Errorf("%s %s lacks the common label", o.GetKind(), o.GetName())
						}
					}
					for _, kind := range []string{"Deployment", "Service", "ServiceAccount"} {
						for _, o := range objs {
							if o.GetKind() == kind && o.GetAnnotations()["owner"] != "ops@example.com" {
								t.Errorf("%s %s lacks the common annotation", kind, o.GetName())
							}
						}
					}
				},
			},
			"ServiceAccount annotations": {
				values: map[string]any{"serviceAccount": map[string]any{"annotations": map[string]any{"iam.gke.io/gcp-service-account": "op@p.iam"}}},
				check: func(t *testing.T, objs []*unstructured.Unstructured) {
					sa := find(t, objs, "ServiceAccount", chart)
					if sa.GetAnnotations()["iam.gke.io/gcp-service-account"] != "op@p.iam" {
						t.Errorf("ServiceAccount annotations %v", sa.GetAnnotations())
					}
				},
			},
			"image registry and digest": {
				values: map[string]any{"image": map[string]any{"registry": "mirror.example.com", "digest": digest, "tag": "ignored"}},
				check: func(t *testing.T, objs []*unstructured.Unstructured) {
					want := "mirror.example.com/ml-platform/" + chart + "@" + digest
					if got := manager(t, objs, chart)["image"]; got != want {
						t.Errorf("image %v, want %s", got, want)
					}
				},
			},
			"PodDisruptionBudget off by default": {
				check: func(t *testing.T, objs []*unstructured.Unstructured) {
					if n := count(objs, "PodDisruptionBudget"); n != 0 {
						t.Errorf("%d PodDisruptionBudgets by default", n)
					}
				},
			},
			"PodDisruptionBudget": {
				values: map[string]any{"podDisruptionBudget": map[string]any{"enabled": true, "minAvailable": 1}},
				check: func(t *testing.T, objs []*unstructured.Unstructured) {
					pdb := find(t, objs, "PodDisruptionBudget", chart)
					if got := field(t, pdb, "spec", "minAvailable"); fmt.Sprint(got) != "1" {
						t.Errorf("minAvailable %v", got)
					}
					if got := field(t, pdb, "spec", "selector", "matchLabels", "app.kubernetes.io/name"); got != chart {
						t.Errorf("selector %v", got)
					}
				},
			},
			"PodDisruptionBudget that blocks every voluntary eviction": {
				values: map[string]any{"podDisruptionBudget": map[string]any{"enabled": true, "maxUnavailable": 0}},
				check: func(t *testing.T, objs []*unstructured.Unstructured) {
					if got := field(t, find(t, objs, "PodDisruptionBudget", chart), "spec", "maxUnavailable"); fmt.Sprint(got) != "0" {
						t.Errorf("maxUnavailable %v, want the 0 it was given", got)
					}
				},
			},
			"topology spread selects the operator's pods": {
				values: map[string]any{"topologySpreadConstraints": []any{map[string]any{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway"}}},
				check: func(t *testing.T, objs []*unstructured.Unstructured) {
					tsc := podSpec(t, objs, chart)["topologySpreadConstraints"].([]any)[0].(map[string]any)
					sel := tsc["labelSelector"].(map[string]any)["matchLabels"].(map[string]any)
					if sel["app.kubernetes.io/name"] != chart || tsc["topologyKey"] != "topology.kubernetes.io/zone" {
						t.Errorf("topologySpreadConstraints %v", tsc)
					}
				},
			},
			"update strategy": {
				values: map[string]any{"strategy": map[string]any{"type": "Recreate"}},
				check: func(t *testing.T, objs []*unstructured.Unstructured) {
					if got := field(t, find(t, objs, "Deployment", chart), "spec", "strategy", "type"); got != "Recreate" {
						t.Errorf("strategy %v", got)
					}
				},
			},
			"log format": {
				values: map[string]any{"logFormat": "console"},
				check: func(t *testing.T, objs []*unstructured.Unstructured) {
					if !contains(strs(manager(t, objs, chart)["args"]), "--zap-encoder=console") {
						t.Errorf("args %v", manager(t, objs, chart)["args"])
					}
				},
			},
			"metrics certificate mounted, passed and verified by the ServiceMonitor": {
				values: map[string]any{"metrics": map[string]any{"certificate": map[string]any{"secretName": "metrics-tls"}, "serviceMonitor": map[string]any{"enabled": true}}},
				check: func(t *testing.T, objs []*unstructured.Unstructured) {
					m := manager(t, objs, chart)
					if !contains(strs(m["args"]), "--metrics-cert-dir=/etc/mlplatform/metrics-certs") || !contains(names(m["volumeMounts"]), "metrics-certs") {
						t.Errorf("the certificate is not passed to the operator: %v %v", m["args"], m["volumeMounts"])
					}
					sm := find(t, objs, "ServiceMonitor", chart)
					tls := field(t, sm, "spec", "endpoints").([]any)[0].(map[string]any)["tlsConfig"].(map[string]any)
					if _, skip := tls["insecureSkipVerify"]; skip || tls["serverName"] != release+"-"+chart+"-metrics."+ns+".svc" {
						t.Errorf("tlsConfig %v", tls)
					}
				},
			},
			"OpenTelemetry from values": {
				values: map[string]any{"tracing": map[string]any{"enabled": true, "endpoint": "http://otel-collector:4317", "insecure": true, "samplingRatio": 0.25}},
				check: func(t *testing.T, objs []*unstructured.Unstructured) {
					env := map[string]string{}
					for _, e := range manager(t, objs, chart)["env"].([]any) {
						e := e.(map[string]any)
						env[fmt.Sprint(e["name"])] = fmt.Sprint(e["value"])
					}
					want := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel-collector:4317", "OTEL_EXPORTER_OTLP_INSECURE": "true", "OTEL_TRACES_SAMPLER_ARG": "0.25"}
					for k, v := range want {
						if env[k] != v {
							t.Errorf("%s=%q, want %q", k, env[k], v)
						}
					}
				},
			},
			"no tracing by default": {
				check: func(t *testing.T, objs []*unstructured.Unstructured) {
					for _, e := range names(manager(t, objs, chart)["env"]) {
						if strings.HasPrefix(e, "OTEL_") {
							t.Errorf("%s set by default", e)
						}
					}
				},
			},
		} {
			t.Run(chart+"/"+name, func(t *testing.T) {
				tc.check(t, objects(t, chartDir(chart), tc.values))
			})
		}
	}
}

// TestServiceMonitorAuthorizesWithoutBearerTokenFile checks the current
// Prometheus Operator fields: a token from a Secret through authorization,
// honorLabels, and a scraper that may only read /metrics.
func TestServiceMonitorAuthorizesWithoutBearerTokenFile(t *testing.T) {
	for _, chart := range operatorCharts {
		t.Run(chart, func(t *testing.T) {
			objs := objects(t, chartDir(chart), map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true}}})
			sm := find(t, objs, "ServiceMonitor", chart)
			ep := field(t, sm, "spec", "endpoints").([]any)[0].(map[string]any)
			if _, old := ep["bearerTokenFile"]; old {
				t.Error("the ServiceMonitor still uses bearerTokenFile")
			}
			if ep["honorLabels"] != true {
				t.Errorf("honorLabels %v, want true", ep["honorLabels"])
			}
			scraper := release + "-" + chart + "-metrics-scraper"
			want := map[string]any{"type": "Bearer", "credentials": map[string]any{"name": scraper, "key": "token"}}
			if diff := cmp.Diff(want, ep["authorization"]); diff != "" {
				t.Errorf("authorization (-want +got):\n%s", diff)
			}
			secret := find(t, objs, "Secret", "-metrics-scraper")
			if secret.GetAnnotations()["kubernetes.io/service-account.name"] != scraper || field(t, secret, "type") != "kubernetes.io/service-account-token" {
				t.Errorf("scraper token Secret %v", secret.Object)
			}
			binding := find(t, objs, "ClusterRoleBinding", "-metrics-scraper")
			if got := field(t, binding, "roleRef", "name"); got != release+"-"+chart+"-metrics-reader" {
				t.Errorf("the scraper is bound to %v", got)
			}
			sel := field(t, sm, "spec", "selector", "matchLabels").(map[string]any)
			for _, svc := range objs {
				if svc.GetKind() != "Service" {
					continue
				}
				selected := true
				for k, v := range sel {
					selected = selected && svc.GetLabels()[k] == v
				}
				if selected != strings.HasSuffix(svc.GetName(), "-metrics") {
					t.Errorf("ServiceMonitor selects Service %s: %v", svc.GetName(), selected)
				}
			}

			own := objects(t, chartDir(chart), map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true, "authorization": map[string]any{"secretName": "prom-token", "key": "t"}}}})
			// Other Secrets (the TrainingJob chart's progress certificate)
			// have nothing to do with the scraper.
			for _, o := range own {
				if o.GetKind() == "Secret" && strings.Contains(o.GetName(), "-metrics-scraper") {
					t.Errorf("Secret %s rendered although authorization.secretName is set", o.GetName())
				}
			}
		})
	}
}

// TestUmbrellaGlobalsReachEverySubchart sets each global of the umbrella and
// checks every operator's Deployment, and that a subchart's own value wins.
func TestUmbrellaGlobalsReachEverySubchart(t *testing.T) {
	values := map[string]any{
		"global": map[string]any{
			"imageRegistry":     "mirror.example.com",
			"imagePullSecrets":  []any{map[string]any{"name": "regcred"}},
			"priorityClassName": "platform-critical",
			"logLevel":          "debug",
			"commonLabels":      map[string]any{"cost-center": "ml"},
		},
		"featurestore-operator": map[string]any{"logLevel": "2", "priorityClassName": "own", "imagePullSecrets": []any{map[string]any{"name": "fs-creds"}}},
	}
	objs := objects(t, umbrella, values)
	for _, chart := range operatorCharts {
		t.Run(chart, func(t *testing.T) {
			pod := podSpec(t, objs, chart)
			m := manager(t, objs, chart)
			wantLevel, wantPC, wantSecrets := "debug", "platform-critical", []string{"regcred"}
			if chart == "featurestore-operator" {
				wantLevel, wantPC, wantSecrets = "2", "own", []string{"fs-creds", "regcred"}
			}
			if !contains(strs(m["args"]), "--zap-log-level="+wantLevel) {
				t.Errorf("args %v, want --zap-log-level=%s", m["args"], wantLevel)
			}
			if pod["priorityClassName"] != wantPC {
				t.Errorf("priorityClassName %v, want %s", pod["priorityClassName"], wantPC)
			}
			if diff := cmp.Diff(wantSecrets, names(pod["imagePullSecrets"])); diff != "" {
				t.Errorf("imagePullSecrets (-want +got):\n%s", diff)
			}
			if got := fmt.Sprint(m["image"]); !strings.HasPrefix(got, "mirror.example.com/ml-platform/"+chart+":") {
				t.Errorf("image %s, want it from mirror.example.com", got)
			}
			if d := find(t, objs, "Deployment", chart); d.GetLabels()["cost-center"] != "ml" {
				t.Errorf("Deployment labels %v", d.GetLabels())
			}
		})
	}
	defaults := objects(t, umbrella, nil)
	for _, chart := range operatorCharts {
		if !contains(strs(manager(t, defaults, chart)["args"]), "--zap-log-level=info") {
			t.Errorf("%s: without any logLevel the operator does not log at info", chart)
		}
		if _, set := podSpec(t, defaults, chart)["imagePullSecrets"]; set {
			t.Errorf("%s: pull secrets without any being configured", chart)
		}
	}
}

// TestUmbrellaNotesSayWhatTheSubchartsSay checks that a user installing the
// umbrella reads every enabled operator's notes.
func TestUmbrellaNotesSayWhatTheSubchartsSay(t *testing.T) {
	notes, err := charttest.Notes(umbrella, release, ns, map[string]any{"featurestore-operator": map[string]any{"enabled": false}})
	if err != nil {
		t.Fatal(err)
	}
	for _, chart := range []string{"trainingjob-operator", "notebook-operator"} {
		own, err := charttest.Notes(chartDir(chart), release, ns, nil)
		if err != nil {
			t.Fatal(err)
		}
		// The operator chart alone names its release <release>-<chart>,
		// exactly as the umbrella's subchart does.
		if !strings.Contains(notes, strings.TrimSpace(own)) {
			t.Errorf("the umbrella's notes lack %s's:\n%s", chart, own)
		}
	}
	if strings.Contains(notes, "featurestore-operator is installed") {
		t.Error("the notes of a disabled operator are printed")
	}
}

// TestChartsValidateResources checks that the schema accepts only a
// container's requests and limits, with quantities.
func TestChartsValidateResources(t *testing.T) {
	for _, chart := range operatorCharts {
		for name, tc := range map[string]struct {
			resources map[string]any
			ok        bool
		}{
			"requests and limits": {map[string]any{"requests": map[string]any{"cpu": "100m", "memory": "128Mi"}, "limits": map[string]any{"memory": "1Gi", "nvidia.com/gpu": 1}}, true},
			"limit, not limits":   {map[string]any{"limit": map[string]any{"cpu": "1"}}, false},
			"not a quantity":      {map[string]any{"requests": map[string]any{"memory": "lots"}}, false},
			"negative":            {map[string]any{"limits": map[string]any{"cpu": -1}}, false},
			"bad resource name":   {map[string]any{"limits": map[string]any{"cpu cores": "1"}}, false},
		} {
			t.Run(chart+"/"+name, func(t *testing.T) {
				_, err := charttest.Render(chartDir(chart), release, ns, map[string]any{"resources": tc.resources})
				if (err == nil) != tc.ok {
					t.Errorf("resources %v: error %v, want ok=%v", tc.resources, err, tc.ok)
				}
			})
		}
	}
	if _, err := charttest.Render(chartDir("trainingjob-operator"), release, ns, map[string]any{"kubeflow": map[string]any{"resources": map[string]any{"limit": map[string]any{"cpu": "1"}}}}); err == nil {
		t.Error("kubeflow.resources.limit passed the schema")
	}
}

// TestChartsRefuseUnsafeOperatorSettings checks that every operator chart
// fails to render, saying what to set, rather than install an operator that
// runs unsafely: replicas that would all reconcile at once (no leader
// election), or the operator's cluster-wide roles bound to the namespace's
// default ServiceAccount, which every pod there runs as.
func TestChartsRefuseUnsafeOperatorSettings(t *testing.T) {
	for _, chart := range operatorCharts {
		for name, tc := range map[string]struct {
			values map[string]any
			want   string
		}{
			"replicas without leader election": {
				map[string]any{"replicas": 2, "leaderElection": map[string]any{"enabled": false}},
				"replicas: 2 needs leaderElection.enabled",
			},
			"a ServiceAccount it does not create and does not name": {
				map[string]any{"serviceAccount": map[string]any{"create": false}},
				"serviceAccount.name is required when serviceAccount.create is false",
			},
		} {
			t.Run(chart+"/"+name, func(t *testing.T) {
				_, err := charttest.Render(chartDir(chart), release, ns, tc.values)
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("values %v: error %v, want one saying %q", tc.values, err, tc.want)
				}
			})
		}
		t.Run(chart+"/one replica without leader election", func(t *testing.T) {
			objs := objects(t, chartDir(chart), map[string]any{"leaderElection": map[string]any{"enabled": false}})
			if args := strs(manager(t, objs, chart)["args"]); !contains(args, "--leader-elect=false") {
				t.Errorf("args %v, want --leader-elect=false", args)
			}
		})
	}
}

// TestChartsRejectCarelessEscapeHatches checks the schema on the values a
// careless edit gets wrong.
func TestChartsRejectCarelessEscapeHatches(t *testing.T) {
	for name, values := range map[string]map[string]any{
		"an arg that is not a flag":     {"extraArgs": []any{"max-backoff=1m"}},
		"env without a name":            {"extraEnv": []any{map[string]any{"value": "x"}}},
		"a mount without a path":        {"volumeMounts": []any{map[string]any{"name": "x"}}},
		"both PDB bounds":               {"podDisruptionBudget": map[string]any{"enabled": true, "minAvailable": 1, "maxUnavailable": 1}},
		"a digest that is not sha256":   {"image": map[string]any{"digest": "latest"}},
		"an unknown log format":         {"logFormat": "xml"},
		"a sampling ratio above 1":      {"tracing": map[string]any{"samplingRatio": 2}},
		"an unknown strategy":           {"strategy": map[string]any{"type": "BlueGreen"}},
		"an unknown ServiceMonitor key": {"metrics": map[string]any{"serviceMonitor": map[string]any{"bearerTokenFile": "/x"}}},
		"an unknown global":             {"global": map[string]any{"imageRegistryy": "x"}},
	} {
		t.Run(name, func(t *testing.T) {
			chart := chartDir("notebook-operator")
			if _, ok := values["global"]; ok {
				chart = umbrella
			}
			if _, err := charttest.Render(chart, release, ns, values); err == nil {
				t.Errorf("values %v rendered; want a schema error", values)
			}
		})
	}
	if _, err := charttest.Render(chartDir("notebook-operator"), release, ns, map[string]any{"tracing": map[string]any{"enabled": true}}); err == nil || !strings.Contains(err.Error(), "tracing.endpoint") {
		t.Errorf("tracing without an endpoint: %v, want an error naming tracing.endpoint", err)
	}
}
