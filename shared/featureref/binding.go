package featureref

import (
	"maps"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
)

// Bind sets on podLabels, the labels of a pod template the operator builds,
// one binding label (commonv1alpha1.FeatureStoreBindingLabel) per store the
// pod mounts, and removes every other binding label first, such as one a
// user wrote into the object's pod template: only a reference resolved by
// the operator binds a pod to a store, and the FeatureStore's NetworkPolicy
// admits bound pods to its managed servers.
func Bind(podLabels map[string]string, stores []Store) {
	maps.DeleteFunc(podLabels, func(key, _ string) bool { return commonv1alpha1.IsFeatureStoreBindingLabel(key) })
	for _, s := range stores {
		podLabels[commonv1alpha1.FeatureStoreBindingLabel(s.Name)] = commonv1alpha1.FeatureStoreBindingLabelValue
	}
}
