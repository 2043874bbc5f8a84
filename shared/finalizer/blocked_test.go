package finalizer

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
	samplev1alpha1 "github.com/ml-platform/ml-platform/shared/internal/sample/v1alpha1"
)

// TestBlockedKeepsTheFinalizerWithoutAFailure: an object still in use is
// kept with its own condition, not CleanupFailed; the event repeats only
// when the users change, and the finalizer goes once nothing blocks it.
func TestBlockedKeepsTheFinalizerWithoutAFailure(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := samplev1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	const name = "testing.mlplatform.dev/in-use"
	w := &samplev1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "", Finalizers: []string{name},
		DeletionTimestamp: &metav1.Time{Time: time.Now().Add(-time.Hour)}}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(w).WithStatusSubresource(w).Build()
	rec := record.NewFakeRecorder(10)
	users := "FeatureStores a/x still use it"
	f := &Finalizer{Name: name, Client: c, APIReader: c, Recorder: rec, Released: "Nothing uses it any more",
		Cleanup: func(context.Context, Object) error {
			if users == "" {
				return nil
			}
			return Blocked("DeletionBlocked", "InUse", users)
		}}
	reconcile := func() *samplev1alpha1.Widget {
		t.Helper()
		got := &samplev1alpha1.Widget{}
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(w), got); err != nil {
			t.Fatal(err)
		}
		res, err := f.Finalize(t.Context(), got)
		if err != nil || res.RequeueAfter != 0 {
			t.Fatalf("Finalize = %+v, %v; want no error and no timed retry", res, err)
		}
		return got
	}
	events := func() []string {
		var out []string
		for len(rec.Events) > 0 {
			out = append(out, <-rec.Events)
		}
		return out
	}

	got := reconcile()
	if c := conditions.Get(got, "DeletionBlocked"); c == nil || c.Status != metav1.ConditionTrue || c.Reason != "InUse" || c.Message != users {
		t.Errorf("DeletionBlocked = %+v", c)
	}
	if conditions.Get(got, commonv1alpha1.ConditionCleanupFailed) != nil || conditions.IsTrue(got, commonv1alpha1.ConditionStalled) {
		t.Errorf("a blocked deletion is reported as a failure: %+v", got.Status.Conditions)
	}
	if e := events(); len(e) != 1 || !strings.HasPrefix(e[0], corev1.EventTypeWarning+" DeletionBlocked") {
		t.Errorf("events = %v, want one DeletionBlocked warning", e)
	}
	reconcile()
	if e := events(); len(e) != 0 {
		t.Errorf("the same users were reported again: %v", e)
	}
	users = "FeatureStores a/y still use it"
	reconcile()
	if e := events(); len(e) != 1 {
		t.Errorf("events after the users changed = %v, want one", e)
	}
	users = ""
	reconcile()
	if e := events(); len(e) != 1 || !strings.Contains(e[0], "Nothing uses it any more") {
		t.Errorf("events on release = %v", e)
	}
}
