package backend

import (
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/manager"
)

// NetworkPolicyName is the name of the NetworkPolicy that guards tj's
// ranks. The suffix keeps it apart from the NetworkPolicy of a Notebook of
// the same name in the namespace.
func NetworkPolicyName(trainingJob string) string {
	return trainingJob + "-ranks"
}

// RankSelector selects the pods of every run of a TrainingJob on both
// backends: PodTemplate puts these labels on every rank (native Indexed
// Job pods, and every replica of a Kubeflow job), over whatever the user's
// template labels say, so no other TrainingJob's pods can carry them. The
// run label is left out: the policy serves every run of the job.
func RankSelector(operatorName, trainingJob string) map[string]string {
	l := manager.ManagedByLabels(operatorName)
	l[trainingv1alpha1.LabelJobName] = trainingJob
	return l
}

// NetworkPolicy admits to the ranks of tj ingress from the ranks of tj
// alone, on every port and protocol (rendezvous, collectives, SSH of MPI
// launchers, whatever the framework opens): a pod of another TrainingJob or
// of another namespace opens no connection to them. Egress is not
// restricted, so rank 0 still reaches the progress endpoint, the
// FeatureStores and the checkpoint storage. Nothing in it comes from the
// TrainingJob's spec: only its namespace and name, which its user cannot
// turn into a wider selector.
func NetworkPolicy(operatorName string, tj *trainingv1alpha1.TrainingJob) *networkingv1.NetworkPolicy {
	labels := RankSelector(operatorName, tj.Name)
	return &networkingv1.NetworkPolicy{
		TypeMeta: metav1.TypeMeta{APIVersion: networkingv1.SchemeGroupVersion.String(), Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: tj.Namespace,
			Name:      NetworkPolicyName(tj.Name),
			Labels:    RankSelector(operatorName, tj.Name),
		},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: labels},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: RankSelector(operatorName, tj.Name)}}},
			}},
		},
	}
}
