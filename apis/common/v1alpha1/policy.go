package v1alpha1

// DeletionPolicy says what happens to data an object provisioned (volumes,
// databases, users) when the object is deleted.
// +kubebuilder:validation:Enum=Retain;Delete
type DeletionPolicy string

const (
	// DeletionPolicyRetain keeps the provisioned data; an event says where.
	DeletionPolicyRetain DeletionPolicy = "Retain"
	// DeletionPolicyDelete removes the provisioned data with the object.
	DeletionPolicyDelete DeletionPolicy = "Delete"
)
