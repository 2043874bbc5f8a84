package featurestore_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/claims"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/cleanup"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/controller/featurestore"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/provisioner/redis"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// Issue 24, left open: a FeatureStore deleted with deletionPolicy Retain
// keeps its Redis keys, and with them its claim on the project's key
// space. A later store with the same project, in another tenant's
// namespace, is refused with a Conflict that says how the claim is
// released, gets no Redis user, and gets the key space only once an
// administrator deleted the record.
func TestRetainedKeysStayClaimedUntilAnAdministratorReleasesThem(t *testing.T) {
	c := adminClient()
	startOperator(t, nil)
	first := waitReady(t, c, createStore(t, c, newStore(testenv.CreateNamespace(t, c, "fs"), "kept", "retainedkeys").retain().obj()))
	keptPlan := cleanup.PlanFor(first)
	t.Cleanup(func() {
		_, _ = cleanup.Run(t.Context(), testResolver(), keptPlan, true)
		releaseRetainedClaim(c, first)
	})
	if err := c.Delete(t.Context(), first); err != nil {
		t.Fatal(err)
	}
	testenv.WaitGone(t, c, first)
	ev := testenv.WaitForEvent(t, c, first, "Retained")
	recordName := featurestore.RetainedClaimName(string(first.UID))
	if !strings.Contains(ev.Message, recordName) {
		t.Errorf("the Retained event does not say which record keeps the key space claimed: %q", ev.Message)
	}
	record := &corev1.ConfigMap{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: operatorNamespace, Name: recordName}, record); err != nil {
		t.Fatalf("no retained claim recorded: %v", err)
	}
	if record.Labels[claims.LabelRetainedClaim] != "true" {
		t.Errorf("the record is not labelled as a retained claim: %v", record.Labels)
	}
	if ok, err := redis.UserExists(t.Context(), redisServer(), keptPlan.RedisStore().User); err != nil || !ok {
		t.Fatalf("the retained Redis user is gone (%v, %v)", ok, err)
	}

	// The server forgets the kept user (restarted without its aclfile, or
	// removed by hand); its keys stay, and so does the claim on them,
	// which is decided from the cluster's records alone.
	if err := redis.Delete(t.Context(), redisServer(), keptPlan.RedisStore(), false); err != nil {
		t.Fatal(err)
	}

	second := createStore(t, c, newStore(testenv.CreateNamespace(t, c, "fs"), "next", "retainedkeys").obj())
	got := waitCondition(t, c, second, featuresv1alpha1.ConditionOnlineStoreReady, metav1.ConditionFalse, featuresv1alpha1.ReasonConflict)
	msg := condMessage(got, featuresv1alpha1.ConditionOnlineStoreReady)
	if !strings.Contains(msg, "deletionPolicy Retain") || !strings.Contains(msg, claims.LabelRetainedClaim) || !strings.Contains(msg, operatorNamespace) {
		t.Errorf("the Conflict does not say that retained keys hold the project, and how to release them: %q", msg)
	}
	// The record's name carries the other store's UID.
	for _, leak := range []string{first.Namespace, string(first.UID)} {
		if strings.Contains(msg, leak) {
			t.Errorf("the Conflict names %s of the other tenant's store: %q", leak, msg)
		}
	}
	waitCondition(t, c, second, commonv1alpha1.ConditionStalled, metav1.ConditionTrue, featuresv1alpha1.ReasonConflict)
	if ok, err := redis.UserExists(t.Context(), redisServer(), cleanup.PlanFor(got).RedisStore().User); err != nil || ok {
		t.Errorf("the second store got a Redis user on the retained key space (%v, %v)", ok, err)
	}

	// The administrator removes the kept keys, then releases the claim.
	if _, err := cleanup.Run(t.Context(), testResolver(), keptPlan, true); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(t.Context(), record); err != nil {
		t.Fatal(err)
	}
	waitReady(t, c, second)
	deleteAndWait(t, c, second)
}
