package featurestorebackend

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/finalizer"
	"github.com/ml-platform/ml-platform/shared/phase"
)

func TestComputeStatus(t *testing.T) {
	type want struct {
		Ready, Reconciling, Stalled metav1.ConditionStatus
		Reason                      string
		Stores                      int32
	}
	two := users{stores: []string{"a/x", "b/y"}}
	for name, tc := range map[string]struct {
		obs  observations
		want want
	}{
		"connected": {
			obs:  observations{users: two, server: serverCheck{outcomeReady, "ok"}},
			want: want{Ready: metav1.ConditionTrue, Reason: commonv1alpha1.ReasonReconciled, Stores: 2},
		},
		"waiting for the Secret": {
			obs:  observations{server: serverCheck{outcomeSecretMissing, "waiting"}},
			want: want{Ready: metav1.ConditionFalse, Reconciling: metav1.ConditionTrue, Reason: featuresv1alpha1.ReasonAdminSecretNotFound},
		},
		"a Secret without keys": {
			obs:  observations{server: serverCheck{outcomeSecretInvalid, "lacks"}},
			want: want{Ready: metav1.ConditionFalse, Stalled: metav1.ConditionTrue, Reason: featuresv1alpha1.ReasonAdminSecretInvalid},
		},
		"credentials refused": {
			obs:  observations{users: two, server: serverCheck{outcomeRefused, "refused"}},
			want: want{Ready: metav1.ConditionFalse, Stalled: metav1.ConditionTrue, Reason: featuresv1alpha1.ReasonAuthenticationFailed, Stores: 2},
		},
		"privileges missing": {
			obs:  observations{server: serverCheck{outcomeUnprivileged, "lacks CREATEROLE"}},
			want: want{Ready: metav1.ConditionFalse, Stalled: metav1.ConditionTrue, Reason: featuresv1alpha1.ReasonInsufficientPrivileges},
		},
		"an sslMode clients cannot verify": {
			obs:  observations{server: serverCheck{outcomeUnverifiable, "sslMode verify-full"}},
			want: want{Ready: metav1.ConditionFalse, Stalled: metav1.ConditionTrue, Reason: featuresv1alpha1.ReasonUnverifiableTLS},
		},
		"server down": {
			obs:  observations{server: serverCheck{outcomeUnavailable, "did not answer"}},
			want: want{Ready: metav1.ConditionFalse, Reconciling: metav1.ConditionTrue, Reason: featuresv1alpha1.ReasonServerUnavailable},
		},
	} {
		t.Run(name, func(t *testing.T) {
			b := &featuresv1alpha1.FeatureStoreBackend{ObjectMeta: metav1.ObjectMeta{Name: "b", Generation: 4}}
			// A deletion that was blocked and then cancelled leaves no
			// trace once the backend is reconciled normally again.
			conditions.MarkTrue(b, featuresv1alpha1.ConditionDeletionBlocked, featuresv1alpha1.ReasonInUse, "old")
			computeStatus(b, tc.obs)
			status := func(ct string) metav1.ConditionStatus {
				if c := conditions.Get(b, ct); c != nil {
					return c.Status
				}
				return ""
			}
			got := want{
				Ready: status(commonv1alpha1.ConditionReady), Reconciling: status(commonv1alpha1.ConditionReconciling),
				Stalled: status(commonv1alpha1.ConditionStalled), Reason: conditions.Get(b, commonv1alpha1.ConditionReady).Reason,
				Stores: ptr.Deref(b.Status.FeatureStores, -1),
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			for _, c := range b.Status.Conditions {
				if c.ObservedGeneration != 4 || c.Type == featuresv1alpha1.ConditionDeletionBlocked {
					t.Errorf("condition %s (observedGeneration %d)", c.Type, c.ObservedGeneration)
				}
			}
		})
	}
}

func TestDeletionBlockedMessage(t *testing.T) {
	many := make([]string, 12)
	for i := range many {
		many[i] = fmt.Sprintf("ns/fs%02d", i)
	}
	for name, tc := range map[string]struct {
		users    users
		want     []string
		wantNone []string
	}{
		"stores": {
			users: users{stores: []string{"a/sales", "b/marketing"}},
			want:  []string{"FeatureStores a/sales, b/marketing still use it"}, wantNone: []string{"handed-off"},
		},
		"handed-off cleanups": {
			users: users{pending: []string{"gone/sales"}},
			want:  []string{"the handed-off cleanups of FeatureStores gone/sales have not finished"}, wantNone: []string{"still use it"},
		},
		"many stores are cut short": {
			users: users{stores: many, pending: []string{"gone/x"}},
			want:  []string{"ns/fs00", "ns/fs09 and 2 more still use it", "gone/x"}, wantNone: []string{"ns/fs10"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			b := &featuresv1alpha1.FeatureStoreBackend{}
			computeDeletionStatus(t, b, tc.users)
			c := conditions.Get(b, featuresv1alpha1.ConditionDeletionBlocked)
			if c == nil || c.Status != metav1.ConditionTrue || c.Reason != featuresv1alpha1.ReasonInUse {
				t.Fatalf("DeletionBlocked: %+v", c)
			}
			for _, w := range tc.want {
				if !strings.Contains(c.Message, w) {
					t.Errorf("%q lacks %q", c.Message, w)
				}
			}
			for _, w := range tc.wantNone {
				if strings.Contains(c.Message, w) {
					t.Errorf("%q has %q", c.Message, w)
				}
			}
			if got := ptr.Deref(b.Status.FeatureStores, -1); got != int32(len(tc.users.stores)) {
				t.Errorf("featureStores %d", got)
			}
		})
	}
}

// TestTransitionEvents covers the backend's event rule, which the runner
// applies after a status write: an event only for what changed.
func TestTransitionEvents(t *testing.T) {
	cond := func(typ string, s metav1.ConditionStatus, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg}
	}
	ready := cond(commonv1alpha1.ConditionReady, metav1.ConditionTrue, "Connected", "connected")
	refused := cond(commonv1alpha1.ConditionReady, metav1.ConditionFalse, featuresv1alpha1.ReasonAuthenticationFailed, "refused")
	progressing := cond(commonv1alpha1.ConditionReady, metav1.ConditionFalse, commonv1alpha1.ReasonProgressing, "checking")
	for name, tc := range map[string]struct {
		before, after []metav1.Condition
		want          []phase.Event
	}{
		"first Ready":             {nil, []metav1.Condition{ready}, []phase.Event{{Type: "Normal", Reason: "Ready", Message: "connected"}}},
		"Ready again":             {[]metav1.Condition{ready}, []metav1.Condition{{Type: ready.Type, Status: ready.Status, Reason: ready.Reason, Message: "other words"}}, nil},
		"Ready lost to a refusal": {[]metav1.Condition{ready}, []metav1.Condition{refused}, []phase.Event{{Type: "Warning", Reason: featuresv1alpha1.ReasonAuthenticationFailed, Message: "refused"}}},
		"refused again":           {[]metav1.Condition{refused}, []metav1.Condition{refused}, nil},
		"a wait is Normal":        {nil, []metav1.Condition{progressing}, []phase.Event{{Type: "Normal", Reason: commonv1alpha1.ReasonProgressing, Message: "checking"}}},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, transitionEvents(tc.before, tc.after)); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// computeDeletionStatus records deletionBlocked on b as the finalizer does.
func computeDeletionStatus(t *testing.T, b *featuresv1alpha1.FeatureStoreBackend, u users) {
	t.Helper()
	var blocked *finalizer.BlockedError
	if err := deletionBlocked(b, u); !errors.As(err, &blocked) {
		t.Fatalf("deletionBlocked = %v, want a BlockedError", err)
	}
	conditions.MarkTrue(b, blocked.Condition, blocked.Reason, blocked.Message)
}
