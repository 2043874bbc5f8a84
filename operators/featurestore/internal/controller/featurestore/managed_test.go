package featurestore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/controller/featurestore"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/podsecurity"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

func TestManagedModeCreatesRestrictedServers(t *testing.T) {
	c := adminClient()
	ns := testenv.CreateNamespace(t, c, "fs")
	op := startOperator(t, nil)
	fs := newStore(ns, "managed", "managed").obj()
	fs.Spec.OnlineStore = featuresv1alpha1.StoreSource{Managed: &featuresv1alpha1.ManagedServer{}}
	fs.Spec.OfflineStore = featuresv1alpha1.StoreSource{Managed: &featuresv1alpha1.ManagedServer{}}
	fs.Spec.Registry = featuresv1alpha1.StoreSource{Managed: &featuresv1alpha1.ManagedServer{}}
	fs = createStore(t, c, fs)

	got := waitCondition(t, c, fs, featuresv1alpha1.ConditionOnlineStoreReady, metav1.ConditionFalse, featuresv1alpha1.ReasonWaitingForServer)
	if !conditions.IsTrue(got, commonv1alpha1.ConditionReconciling) {
		t.Errorf("a store waiting for its servers must be Reconciling: %+v", got.Status.Conditions)
	}
	// Waiting for a new server is what every managed store goes through:
	// a Normal event, not a Warning that alerts would count.
	if ev := testenv.WaitForEvent(t, c, fs, featuresv1alpha1.ReasonWaitingForServer); ev.Type != corev1.EventTypeNormal {
		t.Errorf("event %s is %s, want Normal", ev.Reason, ev.Type)
	}
	recordPasswords(t, c, ns)
	for _, name := range []string{"managed-postgres", "managed-redis"} {
		var sts appsv1.StatefulSet
		testenv.Eventually(t, "StatefulSet "+name, func(ctx context.Context) (bool, error) {
			return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &sts) == nil, nil
		})
		pod := sts.Spec.Template
		if err := podsecurity.CheckRestricted(&pod.ObjectMeta, &pod.Spec); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if !metav1.IsControlledBy(&sts, got) || sts.Labels["app.kubernetes.io/managed-by"] != "featurestore-operator" {
			t.Errorf("%s is not labelled and owned: %v %v", name, sts.Labels, sts.OwnerReferences)
		}
		if p := sts.Spec.PersistentVolumeClaimRetentionPolicy; p == nil || p.WhenDeleted != appsv1.DeletePersistentVolumeClaimRetentionPolicyType {
			t.Errorf("%s: volumes must go with a Delete policy: %+v", name, p)
		}
		for _, v := range pod.Spec.Volumes {
			if v.Secret != nil {
				for _, item := range v.Secret.Items {
					if item.Key == "server-password" {
						t.Errorf("%s mounts the raw password", name)
					}
				}
			}
		}
		var svc corev1.Service
		if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &svc); err != nil {
			t.Errorf("Service %s: %v", name, err)
		}
	}

	// Acting out the StatefulSet controller: a ready server that nobody
	// can reach from the test still does not make the store Ready, since
	// readiness is proven by a connection.
	var sts appsv1.StatefulSet
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "managed-redis"}, &sts); err != nil {
		t.Fatal(err)
	}
	sts.Status.Replicas, sts.Status.ReadyReplicas, sts.Status.ObservedGeneration = 1, 1, sts.Generation
	if err := c.Status().Update(t.Context(), &sts); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the store tries to connect to its ready server", func(ctx context.Context) (bool, error) {
		var err error
		if got, err = getStore(ctx, c, fs); err != nil {
			return false, err
		}
		cond := conditions.Get(got, featuresv1alpha1.ConditionOnlineStoreReady)
		return cond.Status == metav1.ConditionFalse && cond.Reason == featuresv1alpha1.ReasonWaitingForServer &&
			strings.Contains(cond.Message, "is ready but the store cannot log in to it yet"), nil
	})
	if got.Status.ClientConfig != nil {
		t.Error("a client configuration was published before the stores work")
	}
	// No watched object changes when the server starts taking connections
	// (kube-proxy programs its Service, say): the reconcile must come back
	// on its own, soon.
	res, err := op.reconciler.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(fs)})
	if err != nil || res.RequeueAfter <= 0 || res.RequeueAfter > 10*time.Second {
		t.Errorf("a ready server that refused the login is tried again after %v (error %v), want within 10 s", res.RequeueAfter, err)
	}
}

// TestManagedVolumesFollowTheDeletionPolicy deletes FeatureStores with a
// managed online store whose data volume the test creates as the
// StatefulSet controller would (which envtest does not run): with an owner
// reference to the StatefulSet while its retention policy is Delete,
// without one under Retain. The cases where the policy changes just before
// the deletion, faster than that controller updates the references, prove
// that the FeatureStore's policy decides, not the references.
func TestManagedVolumesFollowTheDeletionPolicy(t *testing.T) {
	c := adminClient()
	ns := testenv.CreateNamespace(t, c, "fs")
	startOperator(t, nil)
	ctx := t.Context()
	for name, tc := range map[string]struct {
		created, deleted commonv1alpha1.DeletionPolicy
		wantKept         bool
	}{
		"Delete":                       {created: commonv1alpha1.DeletionPolicyDelete, deleted: commonv1alpha1.DeletionPolicyDelete},
		"Delete, switched from Retain": {created: commonv1alpha1.DeletionPolicyRetain, deleted: commonv1alpha1.DeletionPolicyDelete},
		"Retain":                       {created: commonv1alpha1.DeletionPolicyRetain, deleted: commonv1alpha1.DeletionPolicyRetain, wantKept: true},
		"Retain, switched from Delete": {created: commonv1alpha1.DeletionPolicyDelete, deleted: commonv1alpha1.DeletionPolicyRetain, wantKept: true},
	} {
		t.Run(name, func(t *testing.T) {
			fsName := strings.ToLower(strings.NewReplacer(",", "", " ", "-").Replace(name))
			fs := newStore(ns, fsName, strings.ReplaceAll(fsName, "-", "_")).obj()
			fs.Spec.OnlineStore = featuresv1alpha1.StoreSource{Managed: &featuresv1alpha1.ManagedServer{}}
			fs.Spec.DeletionPolicy = tc.created
			fs = createStore(t, c, fs)
			recordPasswords(t, c, ns)
			pvc := actOutVolumeClaim(t, c, ns, fsName+"-redis")

			if tc.deleted != tc.created {
				// The operator may still be writing status: retry on conflict.
				err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
					latest, err := getStore(ctx, c, fs)
					if err != nil {
						return err
					}
					latest.Spec.DeletionPolicy = tc.deleted
					return c.Update(ctx, latest)
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			if err := c.Delete(ctx, fs); err != nil {
				t.Fatal(err)
			}
			testenv.WaitGone(t, c, fs)
			testenv.Eventually(t, "the StatefulSet is gone", func(ctx context.Context) (bool, error) {
				err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: fsName + "-redis"}, &appsv1.StatefulSet{})
				return apierrors.IsNotFound(err), nil
			})

			if !tc.wantKept {
				testenv.Eventually(t, "the data volume is gone", func(ctx context.Context) (bool, error) {
					err := c.Get(ctx, client.ObjectKeyFromObject(pvc), &corev1.PersistentVolumeClaim{})
					return apierrors.IsNotFound(err), nil
				})
				return
			}
			ev := testenv.WaitForEvent(t, c, fs, "Retained")
			for _, want := range []string{"PersistentVolumeClaim " + pvc.Name, "Secret " + fsName + "-redis"} {
				if !strings.Contains(ev.Message, want) {
					t.Errorf("the Retained event does not name %s: %q", want, ev.Message)
				}
			}
			// Without owner references the garbage collector, which
			// already removed the StatefulSet, never removes them.
			for _, obj := range []client.Object{&corev1.PersistentVolumeClaim{}, &corev1.Secret{}} {
				key := client.ObjectKey{Namespace: ns, Name: pvc.Name}
				if _, ok := obj.(*corev1.Secret); ok {
					key.Name = fsName + "-redis"
				}
				if err := c.Get(ctx, key, obj); err != nil {
					t.Fatalf("%s was not kept: %v", key.Name, err)
				}
				if len(obj.GetOwnerReferences()) > 0 || !obj.GetDeletionTimestamp().IsZero() {
					t.Errorf("%s is still owned or being deleted: %v", key.Name, obj.GetOwnerReferences())
				}
			}
		})
	}
}

// actOutVolumeClaim waits for the managed server's StatefulSet and creates
// its data claim as the StatefulSet controller does: named after the
// template and the pod, labelled from the template and the selector, and
// owned by the StatefulSet when its retention policy deletes claims with it.
func actOutVolumeClaim(t *testing.T, c client.Client, ns, server string) *corev1.PersistentVolumeClaim {
	t.Helper()
	sts := &appsv1.StatefulSet{}
	testenv.Eventually(t, "StatefulSet "+server, func(ctx context.Context) (bool, error) {
		return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: server}, sts) == nil, nil
	})
	tmpl := sts.Spec.VolumeClaimTemplates[0]
	labels := map[string]string{}
	for k, v := range tmpl.Labels {
		labels[k] = v
	}
	for k, v := range sts.Spec.Selector.MatchLabels {
		labels[k] = v
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tmpl.Name + "-" + sts.Name + "-0", Labels: labels},
		Spec:       tmpl.Spec,
	}
	if p := sts.Spec.PersistentVolumeClaimRetentionPolicy; p != nil && p.WhenDeleted == appsv1.DeletePersistentVolumeClaimRetentionPolicyType {
		pvc.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: sts.Name, UID: sts.UID}}
	}
	if err := c.Create(t.Context(), pvc); err != nil {
		t.Fatal(err)
	}
	return pvc
}

// TestManagedServerDriftIsCorrected changes a managed server's StatefulSet
// as other actors do: a field the operator sets (the image) is put back,
// fields it never sets (a nodeSelector injected on admission, a user's
// annotation) survive, and once corrected the server costs no writes.
func TestManagedServerDriftIsCorrected(t *testing.T) {
	c := adminClient()
	ns := testenv.CreateNamespace(t, c, "fs")
	op := startOperator(t, nil)
	fs := newStore(ns, "drifting", "drifting").obj()
	fs.Spec.OnlineStore = featuresv1alpha1.StoreSource{Managed: &featuresv1alpha1.ManagedServer{}}
	createStore(t, c, fs)
	recordPasswords(t, c, ns)
	key := client.ObjectKey{Namespace: ns, Name: "drifting-redis"}
	sts := &appsv1.StatefulSet{}
	testenv.Eventually(t, "StatefulSet "+key.Name, func(ctx context.Context) (bool, error) {
		return c.Get(ctx, key, sts) == nil, nil
	})
	image := sts.Spec.Template.Spec.Containers[0].Image
	writes := op.writesFor(ns, "")
	writes.WaitQuiet(t, 3*time.Second)

	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(t.Context(), key, sts); err != nil {
			return err
		}
		sts.Spec.Template.Spec.Containers[0].Image = "redis:evil"
		sts.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "db"}
		sts.Annotations["team.example/note"] = "keep me"
		return c.Update(t.Context(), sts, client.FieldOwner("someone-else"))
	})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the image is put back", func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, key, sts); err != nil {
			return false, err
		}
		return sts.Spec.Template.Spec.Containers[0].Image == image, nil
	})
	if sts.Spec.Template.Spec.NodeSelector["pool"] != "db" || sts.Annotations["team.example/note"] != "keep me" {
		t.Errorf("fields the operator never sets were lost: nodeSelector %v, annotations %v", sts.Spec.Template.Spec.NodeSelector, sts.Annotations)
	}
	writes.WaitQuiet(t, 3*time.Second)
	before := writes.Count("patch", "statefulsets")
	for range 3 {
		if _, err := op.reconciler.Reconcile(t.Context(), requestFor(fs)); err != nil {
			t.Fatal(err)
		}
	}
	if n := writes.Count("patch", "statefulsets") - before; n != 0 {
		t.Errorf("a corrected StatefulSet was written %d more times: %s", n, writes)
	}
}

// TestRetainedServerDataIsUsedAgain deletes a FeatureStore with managed
// servers under deletionPolicy Retain and creates one of the same name:
// the new store adopts the kept Secrets, whose passwords the kept data
// knows, and its servers get the kept volumes (the StatefulSet controller
// finds them by name). An ownerless Secret of a server's name that does
// not carry the operator's labels for this FeatureStore is never adopted.
func TestRetainedServerDataIsUsedAgain(t *testing.T) {
	c := adminClient()
	ns := testenv.CreateNamespace(t, c, "fs")
	startOperator(t, nil)
	ctx := t.Context()
	servers := []string{"kept-postgres", "kept-redis"}

	first := fullyManagedStore(ns, "kept")
	first.Spec.DeletionPolicy = commonv1alpha1.DeletionPolicyRetain
	first = createStore(t, c, first)
	waitServers(t, c, first)
	passwords := map[string]string{}
	volumes := map[string]*corev1.PersistentVolumeClaim{}
	for _, server := range servers {
		volumes[server] = actOutVolumeClaim(t, c, ns, server)
		secret := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: server}, secret); err != nil {
			t.Fatal(err)
		}
		passwords[server] = string(secret.Data["server-password"])
	}
	deleteAndWait(t, c, first)
	testenv.WaitForEvent(t, c, first, "Retained")
	for _, server := range servers {
		testenv.Eventually(t, "the garbage collector removed StatefulSet "+server, func(ctx context.Context) (bool, error) {
			err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: server}, &appsv1.StatefulSet{})
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		})
	}

	again := createStore(t, c, fullyManagedStore(ns, "kept"))
	waitServers(t, c, again)
	got := waitCondition(t, c, again, commonv1alpha1.ConditionReconciling, metav1.ConditionTrue, featuresv1alpha1.ReasonWaitingForServer)
	if conditions.IsTrue(got, commonv1alpha1.ConditionStalled) {
		t.Fatalf("the re-created store is stalled: %+v", conditions.Get(got, commonv1alpha1.ConditionStalled))
	}
	for _, server := range servers {
		secret := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: server}, secret); err != nil {
			t.Fatal(err)
		}
		if !metav1.IsControlledBy(secret, got) {
			t.Errorf("Secret %s was not adopted: %v", server, secret.OwnerReferences)
		}
		if string(secret.Data["server-password"]) != passwords[server] {
			t.Errorf("Secret %s holds another password than the kept data's", server)
		}
		pvc := &corev1.PersistentVolumeClaim{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(volumes[server]), pvc); err != nil || !pvc.DeletionTimestamp.IsZero() {
			t.Errorf("the kept volume of %s is gone (%v)", server, err)
		}
	}
	testenv.WaitForEvent(t, c, got, "RetainedDataAdopted")
	deleteAndWait(t, c, got)

	for name, labels := range map[string]map[string]string{
		"without the operator's labels":     nil,
		"labelled for another FeatureStore": {"app.kubernetes.io/managed-by": featurestore.OperatorName, featurestore.LabelFeatureStore: "other"},
	} {
		t.Run("ownerless Secret "+name, func(t *testing.T) {
			ns := testenv.CreateNamespace(t, c, "fs")
			planted := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "planted-redis", Labels: labels},
				StringData: map[string]string{"server-password": "chosenByTheTenant0123456789abcde", "users.acl": "user default on nopass ~* +@all\n"}}
			if err := c.Create(ctx, planted); err != nil {
				t.Fatal(err)
			}
			fs := createStore(t, c, managedStore(ns, "planted"))
			waitCondition(t, c, fs, commonv1alpha1.ConditionStalled, metav1.ConditionTrue, commonv1alpha1.ReasonNameTaken)
			requireUntouched(t, c, planted)
			deleteAndWait(t, c, fs)
		})
	}
}

// TestManagedRegistrySizesItsServer: a managed registry next to an
// offline store on a shared backend gets its server sized by its own
// settings. A later change of size cannot reach the existing server's
// volume (the API refuses any change of a StatefulSet's volume claim
// templates): the store keeps working, and its condition says what the
// volume kept.
func TestManagedRegistrySizesItsServer(t *testing.T) {
	c := adminClient()
	ns := testenv.CreateNamespace(t, c, "fs")
	startOperator(t, nil)
	ctx := t.Context()
	fs := newStore(ns, "sized", "sized").obj()
	fs.Spec.Registry = featuresv1alpha1.StoreSource{Managed: &featuresv1alpha1.ManagedServer{
		Storage: ptrTo(resource.MustParse("50Gi")), StorageClassName: ptrTo("fast"),
	}}
	fs = createStore(t, c, fs)
	key := client.ObjectKey{Namespace: ns, Name: "sized-postgres"}
	sts := &appsv1.StatefulSet{}
	testenv.Eventually(t, "StatefulSet "+key.Name, func(ctx context.Context) (bool, error) {
		return c.Get(ctx, key, sts) == nil, nil
	})
	recordPasswords(t, c, ns)
	claim := sts.Spec.VolumeClaimTemplates[0].Spec
	if got := claim.Resources.Requests.Storage(); got.Cmp(resource.MustParse("50Gi")) != 0 || ptr.Deref(claim.StorageClassName, "") != "fast" {
		t.Fatalf("the registry's server requests %v of storage class %v, want 50Gi of fast", got, ptr.Deref(claim.StorageClassName, "the default"))
	}
	waitCondition(t, c, fs, featuresv1alpha1.ConditionRegistryReady, metav1.ConditionFalse, featuresv1alpha1.ReasonWaitingForServer)

	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		latest, err := getStore(ctx, c, fs)
		if err != nil {
			return err
		}
		latest.Spec.Registry.Managed.Storage = ptrTo(resource.MustParse("80Gi"))
		return c.Update(ctx, latest)
	})
	if err != nil {
		t.Fatal(err)
	}
	var got *featuresv1alpha1.FeatureStore
	testenv.Eventually(t, "the registry's condition says what the volume keeps", func(ctx context.Context) (bool, error) {
		var err error
		if got, err = getStore(ctx, c, fs); err != nil {
			return false, err
		}
		return got.Status.ObservedGeneration == got.Generation &&
			strings.Contains(condMessage(got, featuresv1alpha1.ConditionRegistryReady), "keeps the 50Gi on storage class fast"), nil
	})
	if conditions.IsTrue(got, commonv1alpha1.ConditionStalled) {
		t.Errorf("a size the existing server cannot take stalled the store: %+v", conditions.Get(got, commonv1alpha1.ConditionStalled))
	}
	if err := c.Get(ctx, key, sts); err != nil {
		t.Fatal(err)
	}
	if got := sts.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests.Storage(); got.Cmp(resource.MustParse("50Gi")) != 0 {
		t.Errorf("the server's volume claim template asks %v", got)
	}
	deleteAndWait(t, c, fs)
}
