package featurestore

import (
	"context"
	"maps"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
)

// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;update;patch;delete

// NetworkPolicyOptions configure the NetworkPolicy of managed servers.
type NetworkPolicyOptions struct {
	// Enabled gives every FeatureStore with a managed server a
	// NetworkPolicy that admits to its PostgreSQL and Redis only the
	// operator's pods and the pods bound to the store.
	Enabled bool
	// OperatorPodLabels select the operator's own pods in its namespace
	// (Reconciler.Namespace): they provision and check the servers. Empty
	// admits every pod of the operator's namespace.
	OperatorPodLabels map[string]string
}

// NetworkPolicyName is the NetworkPolicy of a FeatureStore's managed
// servers.
func NetworkPolicyName(fs string) string { return fs + "-managed-servers" }

// ensureNetworkPolicy writes the managed servers' NetworkPolicy, or
// deletes the operator's own when the store has no managed server or the
// platform switched the policies off. A foreign NetworkPolicy of that name
// is never overwritten: the store is Stalled with NameTaken until it goes.
func (r *Reconciler) ensureNetworkPolicy(ctx context.Context, s *scope) (ctrl.Result, error) {
	desired := serverNetworkPolicy(s.fs, r.NetworkPolicy, r.Namespace)
	if desired == nil {
		return ctrl.Result{}, r.deleteNetworkPolicy(ctx, s.fs)
	}
	err := r.applyChild(ctx, s.fs, desired)
	if err == nil {
		return ctrl.Result{}, nil
	}
	res, err := failed(err, "NetworkPolicy "+desired.Name)
	if err == nil {
		s.networkPolicyFailure = &res
	}
	return ctrl.Result{}, err
}

// deleteNetworkPolicy removes the store's NetworkPolicy if it is the
// operator's; a foreign one of that name is none of its business.
func (r *Reconciler) deleteNetworkPolicy(ctx context.Context, fs *featuresv1alpha1.FeatureStore) error {
	live := &networkingv1.NetworkPolicy{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: fs.Namespace, Name: NetworkPolicyName(fs.Name)}, live)
	if err != nil {
		return client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(live, fs) {
		return nil
	}
	return client.IgnoreNotFound(r.Client.Delete(ctx, live, client.Preconditions{UID: &live.UID}))
}

// serverNetworkPolicy is the ingress policy of fs's managed servers: their
// ports admit the operator's pods (operatorNamespace and opts'
// labels), which provision the databases and users, and the pods of fs's
// namespace that carry fs's binding label, which the Notebook and
// TrainingJob operators put on the pods of objects that reference fs. It is
// nil when the policies are off or fs runs no managed server.
func serverNetworkPolicy(fs *featuresv1alpha1.FeatureStore, opts NetworkPolicyOptions, operatorNamespace string) *networkingv1.NetworkPolicy {
	var ports []networkingv1.NetworkPolicyPort
	if fs.Spec.OfflineStore.Managed != nil || fs.Spec.Registry.Managed != nil {
		ports = append(ports, tcpPort(managedPostgresPort))
	}
	if fs.Spec.OnlineStore.Managed != nil {
		ports = append(ports, tcpPort(managedRedisPort))
	}
	if !opts.Enabled || len(ports) == 0 {
		return nil
	}
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{Namespace: fs.Namespace, Name: NetworkPolicyName(fs.Name), Labels: childLabels(fs)},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: managedServersSelector(fs)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{
					{
						NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: operatorNamespace}},
						PodSelector:       &metav1.LabelSelector{MatchLabels: maps.Clone(opts.OperatorPodLabels)},
					},
					// A peer with a pod selector alone selects pods of the
					// policy's own namespace, so a bound pod of another
					// namespace is not admitted.
					{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{
						commonv1alpha1.FeatureStoreBindingLabel(fs.Name): commonv1alpha1.FeatureStoreBindingLabelValue,
					}}},
				},
				Ports: ports,
			}},
		},
	}
}

// managedServersSelector selects the pods of every managed server of fs.
func managedServersSelector(fs *featuresv1alpha1.FeatureStore) map[string]string {
	return map[string]string{LabelFeatureStore: fs.Name, "app.kubernetes.io/component": managedServerComponent}
}

func tcpPort(p int32) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(p))}
}
