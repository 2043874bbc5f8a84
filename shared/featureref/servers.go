package featureref

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
)

// The labels and ports of the PostgreSQL and Redis servers that the
// FeatureStore operator runs for a FeatureStore with managed stores (its
// serverLabels; a test of that operator holds it to these).
const (
	// ServerOperator manages the servers (app.kubernetes.io/managed-by).
	ServerOperator = "featurestore-operator"
	// LabelStore names the FeatureStore a server belongs to.
	LabelStore = "features.mlplatform.dev/featurestore"
	// LabelComponent is app.kubernetes.io/component, ServerComponent its
	// value on the servers' pods.
	LabelComponent  = "app.kubernetes.io/component"
	ServerComponent = "featurestore-server"
	// PostgresPort and RedisPort are the servers' ports.
	PostgresPort = 5432
	RedisPort    = 6379
)

// ServerSelector selects the managed servers' pods of the FeatureStore
// named store, in the namespace of the selecting NetworkPolicy.
func ServerSelector(store string) map[string]string {
	return map[string]string{
		commonv1alpha1.LabelManagedBy: ServerOperator,
		LabelStore:                    store,
		LabelComponent:                ServerComponent,
	}
}

// ServerEgress is the NetworkPolicy egress rule to the managed servers of
// the FeatureStores refs name (in the policy's namespace, where references
// point), on their two ports; nil without references. A store whose
// servers are not managed (a shared FeatureStoreBackend's, outside the
// cluster or another namespace) has no such pods: whoever writes the policy
// names those servers in rules of their own.
//
// A name that is not a valid label value is left out: the API server would
// refuse the whole policy for it, and no FeatureStore can have such a name
// (FeatureStore names are at most 63 characters), so Resolve reports the
// reference as not found. The API refuses such references since it caps
// them at 63 characters; objects stored before may still hold one.
func ServerEgress(refs []commonv1alpha1.FeatureStoreReference) *networkingv1.NetworkPolicyEgressRule {
	names := slices.DeleteFunc(IndexValues(refs), func(name string) bool {
		return len(validation.IsValidLabelValue(name)) > 0
	})
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	names = slices.Compact(names)
	rule := &networkingv1.NetworkPolicyEgressRule{}
	for _, name := range names {
		rule.To = append(rule.To, networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: ServerSelector(name)}})
	}
	for _, port := range []int32{PostgresPort, RedisPort} {
		rule.Ports = append(rule.Ports, networkingv1.NetworkPolicyPort{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(port))})
	}
	return rule
}
