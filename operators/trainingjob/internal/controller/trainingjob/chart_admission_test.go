package trainingjob

import (
	"context"
	"maps"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/backend"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/rankdns"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// deniedByOwnedObjectsPolicy reports whether err is the chart's
// owned-objects policy refusing a request, rather than RBAC or validation.
func deniedByOwnedObjectsPolicy(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "owned-objects.training.mlplatform.dev")
}

// TestChartPolicyConfinesTheServiceAccountToItsObjects impersonates the
// chart's ServiceAccount, which RBAC lets write every EndpointSlice and
// NetworkPolicy, delete every Job and collection of pods and create every
// Secret in the cluster: the chart's ValidatingAdmissionPolicy refuses it
// every write to an object without its managed-by label (a slice that
// redirects the kubernetes Service, a tenant's NetworkPolicy or pods, pods
// in kube-system), a labelled slice for a Service that is not a run's, and
// a ServiceAccount's token Secret. What the operator creates for a run is
// admitted: every integration test of this package runs the operator as
// this ServiceAccount under the same policy.
func TestChartPolicyConfinesTheServiceAccountToItsObjects(t *testing.T) {
	admin := adminClient(t)
	op := testenv.NewClient(t, operatorConfig(t), scheme)
	ns := createNamespace(t, admin)
	tenantPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-db"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "db"}}}}
	systemPod := tenantPod.DeepCopy()
	systemPod.Namespace, systemPod.Name = "kube-system", "planted-victim"
	tenantPolicy := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-deny-all"}}
	for _, o := range []client.Object{tenantPod, systemPod, tenantPolicy} {
		if err := admin.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = admin.Delete(context.Background(), o, client.GracePeriodSeconds(0)) })
	}
	hijack := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: "kubernetes-planted", Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"203.0.113.7"}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To[int32](443)}},
	}
	// The API server loads a new policy asynchronously.
	testenv.Eventually(t, "the owned-objects policy is in force", func(ctx context.Context) (bool, error) {
		return deniedByOwnedObjectsPolicy(op.Create(ctx, hijack.DeepCopy(), client.DryRunAll)), nil
	})

	labelledHijack := hijack.DeepCopy()
	labelledHijack.Labels[commonv1alpha1.LabelManagedBy] = operatorName
	for name, write := range map[string]func(ctx context.Context) error{
		"create a slice for the kubernetes Service": func(ctx context.Context) error { return op.Create(ctx, hijack.DeepCopy(), client.DryRunAll) },
		"create a labelled slice for the kubernetes Service": func(ctx context.Context) error {
			return op.Create(ctx, labelledHijack.DeepCopy(), client.DryRunAll)
		},
		"create a slice labelled as a run's for the kubernetes Service": func(ctx context.Context) error {
			asRun := hijack.DeepCopy()
			maps.Copy(asRun.Labels, backend.Labels(operatorName, "train", 1))
			asRun.Labels[discoveryv1.LabelManagedBy] = rankdns.ManagedBy
			return op.Create(ctx, asRun, client.DryRunAll)
		},
		"delete the pods of kube-system": func(ctx context.Context) error {
			return op.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace("kube-system"), client.DryRunAll)
		},
		"delete a tenant's pods": func(ctx context.Context) error {
			return op.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), client.DryRunAll)
		},
		"create an allow-all NetworkPolicy in a tenant's namespace": func(ctx context.Context) error {
			allowAll := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "planted"}, Spec: networkingv1.NetworkPolicySpec{
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, Ingress: []networkingv1.NetworkPolicyIngressRule{{}},
			}}
			return op.Create(ctx, allowAll, client.DryRunAll)
		},
		"delete a tenant's NetworkPolicy": func(ctx context.Context) error {
			return op.Delete(ctx, tenantPolicy.DeepCopy(), client.DryRunAll)
		},
		"adopt a tenant's NetworkPolicy by labelling it": func(ctx context.Context) error {
			adopt := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"app.kubernetes.io/managed-by":"`+operatorName+`"}}}`))
			return op.Patch(ctx, tenantPolicy.DeepCopy(), adopt, client.DryRunAll)
		},
		"create a labelled token Secret for a kube-system ServiceAccount": func(ctx context.Context) error {
			return op.Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "planted-token", Labels: backend.Labels(operatorName, "planted", 1),
					Annotations: map[string]string{corev1.ServiceAccountNameKey: "clusterrole-aggregation-controller"}},
				Type: corev1.SecretTypeServiceAccountToken,
			}, client.DryRunAll)
		},
	} {
		t.Run(name, func(t *testing.T) {
			if err := write(t.Context()); !deniedByOwnedObjectsPolicy(err) {
				t.Errorf("got %v, want the owned-objects policy's refusal", err)
			}
		})
	}
	for _, o := range []client.Object{tenantPod, systemPod, tenantPolicy} {
		if err := admin.Get(t.Context(), client.ObjectKeyFromObject(o), o); err != nil || !o.GetDeletionTimestamp().IsZero() {
			t.Errorf("%s after the refused writes: %v", o.GetName(), err)
		}
	}

	// A run's children, as the operator labels them, are admitted.
	for _, o := range runChildren(ns, "train", 1) {
		if err := op.Create(t.Context(), o, client.DryRunAll); err != nil {
			t.Errorf("the operator creating its %T %s: %v", o, o.GetName(), err)
		}
	}
}

// runChildren are a native run's Job, the namespace's headless Service for
// the ranks and the run's EndpointSlice of its ranks, labelled as the
// operator labels them (backend.Labels, rankdns.NewService,
// rankdns.Desired), and the slice of a run that an earlier version started
// with a Service of its own.
func runChildren(ns, job string, run int32) []client.Object {
	labels := backend.Labels(operatorName, job, run)
	name := backend.JobName(job, run)
	sliceLabels := backend.Labels(operatorName, job, run)
	sliceLabels[discoveryv1.LabelServiceName], sliceLabels[discoveryv1.LabelManagedBy] = rankdns.Service, rankdns.ManagedBy
	earlier := backend.Labels(operatorName, job, run+1)
	earlier[discoveryv1.LabelServiceName], earlier[discoveryv1.LabelManagedBy] = backend.JobName(job, run+1), rankdns.ManagedBy
	return []client.Object{
		&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Spec: batchv1.JobSpec{
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "pytorch", Image: "train"}}, Subdomain: rankdns.Service,
			}},
		}},
		rankdns.NewService(ns, operatorName),
		&discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: sliceLabels},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.7"}, Hostname: ptr.To(name + "-0")}},
		},
		&discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: backend.JobName(job, run+1), Labels: earlier},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.8"}, Hostname: ptr.To(backend.JobName(job, run+1) + "-0")}},
		},
	}
}
