package conditions

import (
	corev1 "k8s.io/api/core/v1"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
)

// EventType is the type of the event that announces a condition turning to
// reason. An ordinary wait that ends by itself (Progressing,
// DependencyNotReady, or one of the kind's own waiting reasons given as
// waits) is Normal: Warning events are what people and alerts watch for,
// and a wait that every object goes through would drown the real ones.
// Anything else may need a person and is a Warning.
func EventType(reason string, waits ...string) string {
	switch reason {
	case commonv1alpha1.ReasonProgressing, commonv1alpha1.ReasonDependencyNotReady:
		return corev1.EventTypeNormal
	}
	for _, w := range waits {
		if reason == w {
			return corev1.EventTypeNormal
		}
	}
	return corev1.EventTypeWarning
}
