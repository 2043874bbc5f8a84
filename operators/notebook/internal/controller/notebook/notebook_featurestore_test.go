package notebook

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/render"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/featureref"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// TestFeatureStoreMountedOnceReady runs against a second API server that
// serves the FeatureStore CRD (only that one of the FeatureStore operator's
// CRDs), so that TestMissingFeatureStoreDoesNotBlock keeps testing a
// cluster without it. The test plays the FeatureStore operator by writing
// the store's status.
func TestFeatureStoreMountedOnceReady(t *testing.T) {
	withStores, err := testenv.Start(testenv.Options{CRDDirectoryPaths: []string{
		filepath.Join(testenv.RepoRoot(), "charts", "notebook-operator", "files", "crds"),
		filepath.Join(testenv.RepoRoot(), "charts", "featurestore-operator", "files", "crds", "features.mlplatform.dev_featurestores.yaml"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := withStores.Stop(); err != nil {
			t.Error(err)
		}
	})
	// The test's client knows FeatureStore as a Go type; the operator's
	// scheme does not, as in production, and reads it as unstructured.
	testScheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(testScheme)
	_ = notebooksv1alpha1.AddToScheme(testScheme)
	_ = featuresv1alpha1.AddToScheme(testScheme)
	c, err := client.New(withStores.Config, client.Options{Scheme: testScheme})
	if err != nil {
		t.Fatal(err)
	}
	ns := testenv.CreateNamespace(t, c, "nb")
	op := startOperator(t, operatorOptions{restConfig: withStores.Config})

	store := &featuresv1alpha1.FeatureStore{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sales"},
		Spec: featuresv1alpha1.FeatureStoreSpec{
			Project:      "sales",
			OnlineStore:  featuresv1alpha1.StoreSource{Backend: "shared-redis"},
			OfflineStore: featuresv1alpha1.StoreSource{Backend: "shared-postgres"},
			Registry:     featuresv1alpha1.StoreSource{Backend: "shared-postgres"},
		},
	}
	if err := c.Create(t.Context(), store); err != nil {
		t.Fatal(err)
	}

	// Culling is off, so no timed requeue exists: only the FeatureStore
	// watch can bring the store's readiness to the Notebook.
	nb := newNotebook(ns, "features")
	nb.Spec.Culling.Enabled = ptr.To(false)
	nb.Spec.FeatureStores = []commonv1alpha1.FeatureStoreReference{{LocalObjectReference: commonv1alpha1.LocalObjectReference{Name: "sales"}}}
	got := runningNotebook(t, c, op, nb, t0)
	cond := conditions.Get(got, notebooksv1alpha1.ConditionFeatureStoresReady)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != commonv1alpha1.ReasonDependencyNotReady || !strings.Contains(cond.Message, "sales") {
		t.Fatalf("FeatureStoresReady while the store is not Ready = %+v", cond)
	}
	sts, err := getStatefulSet(t.Context(), c, nb)
	if err != nil {
		t.Fatal(err)
	}
	if v := volumeOf(sts.Spec.Template.Spec, featureref.VolumeName("sales")); v != nil {
		t.Fatalf("a store that is not Ready is mounted: %+v", v)
	}

	// The FeatureStore operator provisions the store and publishes its
	// client configuration.
	store.Status = featuresv1alpha1.FeatureStoreStatus{
		ObservedGeneration: store.Generation,
		ClientConfig:       &commonv1alpha1.FeatureStoreClientConfig{SecretName: "sales-feast", Key: commonv1alpha1.FeatureStoreConfigKey},
		Conditions: []metav1.Condition{{
			Type: commonv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: commonv1alpha1.ReasonReconciled,
			ObservedGeneration: store.Generation, LastTransitionTime: metav1.Now(),
		}},
	}
	if err := c.Status().Update(t.Context(), store); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the client configuration mounted", func(ctx context.Context) (bool, error) {
		sts, err := getStatefulSet(ctx, c, nb)
		if err != nil {
			return false, err
		}
		return volumeOf(sts.Spec.Template.Spec, featureref.VolumeName("sales")) != nil, nil
	})
	sts, _ = getStatefulSet(t.Context(), c, nb)
	pod := sts.Spec.Template.Spec
	if v := volumeOf(pod, featureref.VolumeName("sales")); v.Secret == nil || v.Secret.SecretName != "sales-feast" {
		t.Errorf("volume %+v, want the Secret sales-feast", v)
	}
	container := pod.Containers[slices.IndexFunc(pod.Containers, func(c corev1.Container) bool { return c.Name == render.ContainerName })]
	mount := container.VolumeMounts[slices.IndexFunc(container.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == featureref.VolumeName("sales") })]
	if mount.SubPath != "" || !mount.ReadOnly || mount.MountPath != featureref.MountPath("sales") {
		t.Errorf("mount %+v: want the whole volume read-only at %s, without subPath", mount, featureref.MountPath("sales"))
	}
	wantEnv := corev1.EnvVar{Name: commonv1alpha1.FeatureStoreEnvVar, Value: featureref.MountPath("sales") + "/" + commonv1alpha1.FeatureStoreConfigKey}
	if !slices.Contains(container.Env, wantEnv) {
		t.Errorf("env %v lacks %v", container.Env, wantEnv)
	}
	if l := sts.Spec.Template.Labels; l[commonv1alpha1.FeatureStoreBindingLabel("sales")] != commonv1alpha1.FeatureStoreBindingLabelValue {
		t.Errorf("the pod is not bound to the store, which its NetworkPolicy admits: labels %v", l)
	}
	actOutStatefulSet(t, c, nb)
	got = waitNotebook(t, c, nb, "FeatureStoresReady", func(nb *notebooksv1alpha1.Notebook) bool {
		return conditions.IsTrue(nb, notebooksv1alpha1.ConditionFeatureStoresReady) && isReady(nb)
	})

	// Settled with the mount: checks cost no writes.
	waitCached(t, op, got, func(nb *notebooksv1alpha1.Notebook) bool {
		return conditions.IsTrue(nb, notebooksv1alpha1.ConditionFeatureStoresReady) && isReady(nb)
	})
	op.Writes.Reset()
	op.reconcile(t, nb)
	if n := op.writesIn(nb.Namespace).Total(); n != 0 {
		t.Fatalf("a settled Notebook with a mounted FeatureStore wrote: %s", op.writesIn(nb.Namespace))
	}
}

func volumeOf(pod corev1.PodSpec, name string) *corev1.Volume {
	for i := range pod.Volumes {
		if pod.Volumes[i].Name == name {
			return &pod.Volumes[i]
		}
	}
	return nil
}
