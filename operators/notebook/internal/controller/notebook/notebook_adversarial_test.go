package notebook

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

func stalledWith(reason string) func(*notebooksv1alpha1.Notebook) bool {
	return func(nb *notebooksv1alpha1.Notebook) bool {
		s := conditions.Get(nb, commonv1alpha1.ConditionStalled)
		return s != nil && s.Status == metav1.ConditionTrue && s.Reason == reason
	}
}

// TestChildRejectionStallsUntilTheSpecChanges gives the operator Notebooks
// whose StatefulSet the API server refuses although the Notebook itself
// passed admission: each is Stalled with the API server's own message and
// a Warning event, the reconcile asks for no retry (no error, no requeue),
// and fixing the spec brings the Notebook up.
func TestChildRejectionStallsUntilTheSpecChanges(t *testing.T) {
	c := env.AdminClient(t, scheme)
	ns := testenv.CreateNamespace(t, c, "nb")
	op := startOperator(t, operatorOptions{})
	for name, tc := range map[string]struct {
		mutate func(*notebooksv1alpha1.Notebook)
		fix    func(*notebooksv1alpha1.Notebook)
		// wantAPI is part of the API server's own message.
		wantAPI string
	}{
		"a toleration with a value for Exists": {
			mutate: func(nb *notebooksv1alpha1.Notebook) {
				nb.Spec.PodTemplate = &notebooksv1alpha1.PodTemplate{Tolerations: []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists, Value: "yes"}}}
			},
			fix:     func(nb *notebooksv1alpha1.Notebook) { nb.Spec.PodTemplate = nil },
			wantAPI: "spec.template.spec.tolerations[0].operator",
		},
		"an injected node selector key": {
			mutate: func(nb *notebooksv1alpha1.Notebook) {
				nb.Spec.PodTemplate = &notebooksv1alpha1.PodTemplate{NodeSelector: map[string]string{"zone; rm -rf /": "a"}}
			},
			fix:     func(nb *notebooksv1alpha1.Notebook) { nb.Spec.PodTemplate = nil },
			wantAPI: "spec.template.spec.nodeSelector",
		},
		"an extended resource without a limit": {
			mutate: func(nb *notebooksv1alpha1.Notebook) {
				nb.Spec.Resources.Requests = corev1.ResourceList{"example.com/widget": resource.MustParse("1")}
			},
			fix:     func(nb *notebooksv1alpha1.Notebook) { nb.Spec.Resources.Requests = nil },
			wantAPI: "Limit must be set for non overcommitable resources",
		},
	} {
		t.Run(name, func(t *testing.T) {
			nb := newNotebook(ns, strings.ReplaceAll(name, " ", "-")[:20])
			nb.Name = strings.TrimRight(nb.Name, "-")
			tc.mutate(nb)
			if err := c.Create(t.Context(), nb); err != nil {
				t.Fatalf("the Notebook itself was refused: %v", err)
			}
			got := waitNotebook(t, c, nb, "Stalled ChildRejected", stalledWith(commonv1alpha1.ReasonChildRejected))
			msg := conditions.Get(got, commonv1alpha1.ConditionStalled).Message
			if !strings.Contains(msg, "StatefulSet") || !strings.Contains(msg, tc.wantAPI) {
				t.Errorf("Stalled message %q lacks the API server's message about %s", msg, tc.wantAPI)
			}
			if got.Status.Phase != notebooksv1alpha1.PhaseFailed || kstatusOf(t, got) != "Failed" {
				t.Errorf("phase %s, kstatus %s", got.Status.Phase, kstatusOf(t, got))
			}
			if e := testenv.WaitForEvent(t, c, got, commonv1alpha1.ReasonChildRejected); e.Type != corev1.EventTypeWarning || e.Message != msg {
				t.Errorf("event %s %q, want Warning %q", e.Type, e.Message, msg)
			}
			// No hot retry: the reconcile neither fails (which would
			// retry with backoff) nor asks to come back.
			if res := op.reconcile(t, got); res.RequeueAfter != 0 || res.Requeue { //nolint:staticcheck // Requeue is what a hot loop would set
				t.Errorf("a refused child asked for a retry: %+v", res)
			}

			updateNotebook(t, c, nb, tc.fix)
			waitNotebook(t, c, nb, "recovered after the fix", func(nb *notebooksv1alpha1.Notebook) bool {
				return conditions.Get(nb, commonv1alpha1.ConditionStalled) == nil
			})
			if _, err := getStatefulSet(t.Context(), c, nb); err != nil {
				t.Errorf("no StatefulSet after the fix: %v", err)
			}
		})
	}
}

// TestForeignObjectsAreNeverAdopted lets a tenant create, first, an object
// of a name the Notebook needs: the Notebook is Stalled with NameTaken and
// the foreign object is left exactly as it was (no owner reference, no
// label, no field of ours).
func TestForeignObjectsAreNeverAdopted(t *testing.T) {
	c := env.AdminClient(t, scheme)
	ns := testenv.CreateNamespace(t, c, "nb")
	startOperator(t, operatorOptions{})
	labels := map[string]string{"app": "mine"}
	for name, tc := range map[string]struct {
		foreign func(nb string) client.Object
	}{
		"token Secret": {foreign: func(nb string) client.Object {
			return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: nb + "-token", Labels: labels}, StringData: map[string]string{"token": "chosen-by-tenant"}}
		}},
		"Service": {foreign: func(nb string) client.Object {
			return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: nb, Labels: labels},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
		}},
		"StatefulSet": {foreign: func(nb string) client.Object {
			sel := map[string]string{"app": "mine-" + nb}
			return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: nb, Labels: labels}, Spec: appsv1.StatefulSetSpec{
				Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: sel},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}},
			}}
		}},
		"workspace claim": {foreign: func(nb string) client.Object {
			return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: nb + "-workspace", Labels: labels}, Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			}}
		}},
	} {
		t.Run(name, func(t *testing.T) {
			nbName := "f-" + strings.ToLower(strings.ReplaceAll(name, " ", "-"))
			obj := tc.foreign(nbName)
			if err := c.Create(t.Context(), obj); err != nil {
				t.Fatal(err)
			}
			before := obj.GetResourceVersion()
			nb := newNotebook(ns, nbName)
			if err := c.Create(t.Context(), nb); err != nil {
				t.Fatal(err)
			}
			got := waitNotebook(t, c, nb, "Stalled NameTaken", stalledWith(commonv1alpha1.ReasonNameTaken))
			if msg := conditions.Get(got, commonv1alpha1.ConditionStalled).Message; !strings.Contains(msg, obj.GetName()) {
				t.Errorf("Stalled message %q does not name %s", msg, obj.GetName())
			}
			testenv.WaitForEvent(t, c, got, commonv1alpha1.ReasonNameTaken)
			if err := c.Get(t.Context(), client.ObjectKeyFromObject(obj), obj); err != nil {
				t.Fatal(err)
			}
			if obj.GetResourceVersion() != before || len(obj.GetOwnerReferences()) != 0 || obj.GetLabels()["app.kubernetes.io/managed-by"] != "" {
				t.Errorf("the foreign %s was changed: resourceVersion %s -> %s, owners %v, labels %v",
					name, before, obj.GetResourceVersion(), obj.GetOwnerReferences(), obj.GetLabels())
			}
		})
	}
}

// TestHostileNotebooksAreRefusedAtAdmission is the part of the adversarial
// table that the API server settles before the operator sees anything:
// an oversized Notebook and names that no child could take.
func TestHostileNotebooksAreRefusedAtAdmission(t *testing.T) {
	c := env.AdminClient(t, scheme)
	ns := testenv.CreateNamespace(t, c, "nb")
	big := strings.Repeat("x", 64*1024)
	for name, tc := range map[string]struct {
		nb      func() *notebooksv1alpha1.Notebook
		wantErr func(error) bool
	}{
		"oversized: 64 variables of 64KiB, over the request limit": {
			nb: func() *notebooksv1alpha1.Notebook {
				nb := newNotebook(ns, "huge")
				for i := range 64 {
					nb.Spec.Env = append(nb.Spec.Env, corev1.EnvVar{Name: "V" + strings.Repeat("I", i), Value: big})
				}
				return nb
			},
			wantErr: func(err error) bool { return err != nil && strings.Contains(err.Error(), "too large") },
		},
		"injected: a path in the name": {
			nb:      func() *notebooksv1alpha1.Notebook { return newNotebook(ns, "a..b") },
			wantErr: apierrors.IsInvalid,
		},
		"a name for which the Service would be invalid": {
			nb:      func() *notebooksv1alpha1.Notebook { return newNotebook(ns, "x.y") },
			wantErr: apierrors.IsInvalid,
		},
	} {
		t.Run(name, func(t *testing.T) {
			err := c.Create(t.Context(), tc.nb(), client.DryRunAll)
			if !tc.wantErr(err) {
				t.Fatalf("got %v", err)
			}
		})
	}
}
