package featureref

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
)

func TestServerEgress(t *testing.T) {
	ref := func(name string) commonv1alpha1.FeatureStoreReference {
		return commonv1alpha1.FeatureStoreReference{LocalObjectReference: commonv1alpha1.LocalObjectReference{Name: name}}
	}
	peer := func(store string) networkingv1.NetworkPolicyPeer {
		return networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{
			"app.kubernetes.io/managed-by":         "featurestore-operator",
			"features.mlplatform.dev/featurestore": store,
			"app.kubernetes.io/component":          "featurestore-server",
		}}}
	}
	ports := []networkingv1.NetworkPolicyPort{
		{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(5432))},
		{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(6379))},
	}
	for name, tc := range map[string]struct {
		refs []commonv1alpha1.FeatureStoreReference
		want *networkingv1.NetworkPolicyEgressRule
	}{
		"no store": {},
		"one store": {
			refs: []commonv1alpha1.FeatureStoreReference{ref("sales")},
			want: &networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{peer("sales")}, Ports: ports},
		},
		"stores sorted, once each, of the policy's namespace only": {
			refs: []commonv1alpha1.FeatureStoreReference{ref("web"), ref("sales"), ref("web")},
			want: &networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{peer("sales"), peer("web")}, Ports: ports},
		},
		"a name no FeatureStore can have, which no label may hold, left out": {
			refs: []commonv1alpha1.FeatureStoreReference{ref(strings.Repeat("s", 64)), ref("sales")},
			want: &networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{peer("sales")}, Ports: ports},
		},
		"only such names: no rule": {refs: []commonv1alpha1.FeatureStoreReference{ref(strings.Repeat("s", 64))}},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ServerEgress(tc.refs)); diff != "" {
				t.Errorf("ServerEgress (-want +got):\n%s", diff)
			}
		})
	}
}
