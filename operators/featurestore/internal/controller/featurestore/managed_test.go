package featurestore_test

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/podsecurity"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

func TestManagedModeCreatesRestrictedServers(t *testing.T) {
	c := adminClient()
	ns := testenv.CreateNamespace(t, c, "fs")
	startOperator(t, nil)
	fs := newStore(ns, "managed", "managed").obj()
	fs.Spec.OnlineStore = featuresv1alpha1.StoreSource{Managed: &featuresv1alpha1.ManagedServer{}}
	fs.Spec.OfflineStore = featuresv1alpha1.StoreSource{Managed: &featuresv1alpha1.ManagedServer{}}
	fs.Spec.Registry = featuresv1alpha1.StoreSource{Managed: &featuresv1alpha1.ManagedServer{}}
	fs = createStore(t, c, fs)

	got := waitCondition(t, c, fs, featuresv1alpha1.ConditionOnlineStoreReady, metav1.ConditionFalse, featuresv1alpha1.ReasonWaitingForServer)
	if !conditions.IsTrue(got, commonv1alpha1.ConditionReconciling) {
		t.Errorf("a store waiting for its servers must be Reconciling: %+v", got.Status.Conditions)
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
			strings.Contains(cond.Message, "refuses the store's user"), nil
	})
	if got.Status.ClientConfig != nil {
		t.Error("a client configuration was published before the stores work")
	}
}
