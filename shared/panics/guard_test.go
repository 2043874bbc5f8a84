package panics

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TestGuardReportsOnAKindWithoutConditions: a controller of a kind without
// conditions (the handed-off cleanup's ConfigMap) is guarded too; its panic
// becomes an error and a Warning event on the object, which is left as it
// was.
func TestGuardReportsOnAKindWithoutConditions(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "plan"}, Data: map[string]string{"plan": "{}"}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(cm).Build()
	rec := record.NewFakeRecorder(10)
	guarded := Wrap(&Guard{Name: "pendingcleanup", Prototype: &corev1.ConfigMap{}, Client: c, APIReader: c, Recorder: rec},
		reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
			panic("boom")
		}))

	_, err := guarded.Reconcile(t.Context(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(cm)})
	if err == nil || !strings.Contains(err.Error(), "recovered panic") {
		t.Fatalf("Reconcile error = %v, want the recovered panic", err)
	}
	select {
	case e := <-rec.Events:
		if !strings.HasPrefix(e, corev1.EventTypeWarning+" "+EventInternalError) {
			t.Errorf("event = %q, want a Warning %s", e, EventInternalError)
		}
	default:
		t.Error("no event recorded on the ConfigMap")
	}
	got := &corev1.ConfigMap{}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(cm), got); err != nil {
		t.Fatal(err)
	}
	if got.Data["plan"] != "{}" || len(got.Annotations) != 0 {
		t.Errorf("the ConfigMap changed: %+v", got)
	}
}
