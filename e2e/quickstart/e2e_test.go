package quickstart

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/ml-platform/ml-platform/e2e/cluster"
)

// The e2e tests run against the release of make quickstart (make
// e2e-quickstart). The timeouts are bounds, not expectations: the build
// machines have two shared cores, and a PyTorch pod alone takes a while to
// import torch there.
const (
	pollInterval      = 2 * time.Second
	deploymentTimeout = 5 * time.Minute
)

// sampleWaits says, per kind, which condition a sample reaches when it
// works, which one means it never will, and how long to wait.
var sampleWaits = map[string]struct {
	done, failed string
	timeout      time.Duration
}{
	"FeatureStore": {done: "Ready", failed: "Stalled", timeout: 10 * time.Minute},
	"Notebook":     {done: "Ready", failed: "Stalled", timeout: 10 * time.Minute},
	"TrainingJob":  {done: "Succeeded", failed: "Failed", timeout: 15 * time.Minute},
}

func TestQuickstartOperatorsAvailable(t *testing.T) {
	cs := cluster.Client(t)
	for _, name := range []string{
		"ml-platform-trainingjob-operator",
		"ml-platform-notebook-operator",
		"ml-platform-featurestore-operator",
	} {
		t.Run(name, func(t *testing.T) {
			var last *appsv1.Deployment
			err := wait.PollUntilContextTimeout(t.Context(), pollInterval, deploymentTimeout, true, func(ctx context.Context) (bool, error) {
				d, err := cs.AppsV1().Deployments(Namespace).Get(ctx, name, metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					return false, fmt.Errorf("no Deployment %s/%s: run make quickstart first", Namespace, name)
				}
				if err != nil {
					return false, err
				}
				last = d
				for _, c := range d.Status.Conditions {
					if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
						return true, nil
					}
				}
				return false, nil
			})
			if err != nil {
				if last != nil {
					t.Logf("conditions: %+v", last.Status.Conditions)
				}
				t.Fatalf("Deployment %s/%s not Available: %v", Namespace, name, err)
			}
		})
	}
}

// TestQuickstartBusyboxIsOnTheNode checks the one image of values-kind.yaml
// whose tag the repository does not fix: the busybox of the node image is
// tagged with Debian's package version when the node image is built.
func TestQuickstartBusyboxIsOnTheNode(t *testing.T) {
	cs := cluster.Client(t)
	onNode, err := cluster.BusyboxImage(t.Context(), cs)
	if err != nil {
		t.Fatal(err)
	}
	values, err := LoadValues(KindValues)
	if err != nil {
		t.Fatal(err)
	}
	kubeflow, _ := values["trainingjob-operator"].(map[string]any)["kubeflow"].(map[string]any)
	initContainer, _ := kubeflow["pytorchInitContainer"].(map[string]any)
	if got := initContainer["image"]; got != onNode {
		t.Errorf("values-kind.yaml: kubeflow.pytorchInitContainer.image %q, but the node has %q", got, onNode)
	}
}

// TestQuickstartSamples applies every sample of deploy/samples in a new
// namespace that enforces the restricted Pod Security Standard, as the
// quickstart's instructions do, and waits for each to be Ready (long-running
// kinds) or Succeeded (TrainingJob).
func TestQuickstartSamples(t *testing.T) {
	cs := cluster.Client(t)
	cfg, err := cluster.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	samples, err := Samples()
	if err != nil {
		t.Fatal(err)
	}
	ns := samplesNamespace(t, cs)
	start := time.Now()
	for _, s := range samples {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(s.YAML, &obj.Object); err != nil {
			t.Fatalf("%s: %v", s.File, err)
		}
		if _, err := dyn.Resource(resource(s.GVK)).Namespace(ns).Create(t.Context(), obj, metav1.CreateOptions{}); err != nil {
			t.Fatalf("%s: %v", s.File, err)
		}
	}
	for _, s := range samples {
		t.Run(s.File, func(t *testing.T) {
			t.Parallel()
			want, ok := sampleWaits[s.GVK.Kind]
			if !ok {
				t.Fatalf("no wait for kind %s", s.GVK.Kind)
			}
			client := dyn.Resource(resource(s.GVK)).Namespace(ns)
			var conditions []metav1.Condition
			err := wait.PollUntilContextTimeout(t.Context(), pollInterval, want.timeout, true, func(ctx context.Context) (bool, error) {
				obj, err := client.Get(ctx, s.Name, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				if conditions, err = conditionsOf(obj); err != nil {
					return false, err
				}
				if c := meta.FindStatusCondition(conditions, want.failed); c != nil && c.Status == metav1.ConditionTrue {
					return false, fmt.Errorf("%s=True (%s): %s", c.Type, c.Reason, c.Message)
				}
				return meta.IsStatusConditionTrue(conditions, want.done), nil
			})
			if err != nil {
				for _, c := range conditions {
					t.Logf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
				}
				// The deadline may end the poll inside a read, whose error
				// then says only that the client's context expired.
				if wait.Interrupted(err) || errors.Is(err, context.DeadlineExceeded) {
					err = fmt.Errorf("not within %s: %w", want.timeout, err)
				}
				t.Fatalf("%s %s/%s not %s: %v", s.GVK.Kind, ns, s.Name, want.done, err)
			}
			// Logged for the timings of the quickstart's documentation.
			t.Logf("%s %s is %s after %s", s.GVK.Kind, s.Name, want.done, time.Since(start).Round(time.Second))
		})
	}
}

// samplesNamespace creates a namespace that enforces the restricted Pod
// Security Standard and deletes it afterwards, with the samples (whose
// finalizers need the operators still running). It dumps the namespace
// when the test failed, and fails the test when a pod in it pulled an
// image, which the offline cluster cannot do.
func samplesNamespace(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	created, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "quickstart-",
		Labels: map[string]string{
			"app.kubernetes.io/part-of":          "ml-platform-e2e",
			"pod-security.kubernetes.io/enforce": "restricted",
		},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns := created.Name
	t.Cleanup(func() {
		ctx := context.Background()
		if events, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=Pulling"}); err == nil {
			for _, e := range events.Items {
				t.Errorf("%s pulled an image: %s", e.InvolvedObject.Name, e.Message)
			}
		}
		if t.Failed() {
			cluster.DumpNamespace(t, cs, ns)
		}
		if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", ns, err)
		}
	})
	return ns
}

// resource is the API resource of a sample's kind: the platform's kinds
// are named by their lower-case plural.
func resource(gvk schema.GroupVersionKind) schema.GroupVersionResource {
	plural, _ := meta.UnsafeGuessKindToResource(gvk)
	return plural
}

func conditionsOf(obj *unstructured.Unstructured) ([]metav1.Condition, error) {
	raw, _, err := unstructured.NestedSlice(obj.Object, "status", "conditions")
	if err != nil {
		return nil, err
	}
	var out []metav1.Condition
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			continue
		}
		var c metav1.Condition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &c); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}
