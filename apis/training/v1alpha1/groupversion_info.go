package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion of the training API.
var GroupVersion = schema.GroupVersion{Group: "training.mlplatform.dev", Version: "v1alpha1"}

// AddToScheme registers TrainingJob and TrainingJobList. It is written out
// rather than built with controller-runtime's scheme.Builder so that this
// module depends on k8s.io/apimachinery only.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &TrainingJob{}, &TrainingJobList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
