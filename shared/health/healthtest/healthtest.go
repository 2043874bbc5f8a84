// Package healthtest checks in tests what kstatus and the shipped Argo CD
// health checks make of an object, so every kind's health table reads alike.
package healthtest

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/ml-platform/ml-platform/shared/health"
)

// Expect fails t unless kstatus computes wantKstatus for obj and the Argo CD
// health check of its kind returns wantArgo with a message.
func Expect(t testing.TB, obj runtime.Object, wantKstatus status.Status, wantArgo string) {
	t.Helper()
	ks, err := health.Kstatus(obj)
	if err != nil {
		t.Fatal(err)
	}
	if ks.Status != wantKstatus {
		t.Errorf("kstatus %s (%s), want %s", ks.Status, ks.Message, wantKstatus)
	}
	argo, err := health.ArgoCD(obj)
	if err != nil {
		t.Fatal(err)
	}
	if argo.Status != wantArgo {
		t.Errorf("Argo CD %s (%s), want %s", argo.Status, argo.Message, wantArgo)
	}
	if argo.Message == "" {
		t.Error("Argo CD health without a message")
	}
}
