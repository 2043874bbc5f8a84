package v1alpha1

// Condition types shared by every ml-platform kind. They follow kstatus
// (sigs.k8s.io/cli-utils/pkg/kstatus): tools such as Helm 4 --wait, Flux and
// Argo CD read Reconciling and Stalled together with observedGeneration,
// while people and `kubectl wait` read Ready, Succeeded and Failed.
const (
	// ConditionReady is True when a long-running object serves its purpose.
	ConditionReady = "Ready"
	// ConditionReconciling is True while the operator works towards the
	// desired state and expects to get there without help.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when the operator cannot make progress
	// without a change from a person (bad input, a deadline passed).
	ConditionStalled = "Stalled"
	// ConditionSucceeded is True once a bounded object finished successfully.
	ConditionSucceeded = "Succeeded"
	// ConditionFailed is True once a bounded object finished unsuccessfully.
	ConditionFailed = "Failed"
	// ConditionSuspended is True while the user has suspended the object.
	ConditionSuspended = "Suspended"
	// ConditionCleanupFailed is True while the cleanup of external resources
	// behind a finalizer keeps failing; the message says why.
	ConditionCleanupFailed = "CleanupFailed"
)

// Condition reasons shared by every ml-platform kind. Each is one CamelCase
// word, as metav1.Condition requires.
const (
	ReasonReconciled              = "Reconciled"
	ReasonProgressing             = "Progressing"
	ReasonInvalidSpec             = "InvalidSpec"
	ReasonCleanupError            = "CleanupError"
	ReasonCleanupDeadlineExceeded = "CleanupDeadlineExceeded"
	ReasonDependencyNotReady      = "DependencyNotReady"
	ReasonDependencyNotFound      = "DependencyNotFound"
	// ReasonCleanupDependencyMissing: cleanup cannot run because something
	// it needs (an admin Secret, a backend object) is missing; the external
	// resources are still there.
	ReasonCleanupDependencyMissing = "CleanupDependencyMissing"
	// ReasonInternalError: the operator hit an unforeseen error (a
	// recovered panic) reconciling the object; it retries with backoff.
	ReasonInternalError = "InternalError"
	// ReasonChildRejected: the API server refused a child the operator
	// derived from the spec; the message is the API server's own. Only a
	// change of the spec can fix it.
	ReasonChildRejected = "ChildRejected"
	// ReasonPodsRefused: the API server refuses the pods the object's
	// child asks for (Pod Security admission, an exhausted ResourceQuota, a
	// LimitRange, an admission webhook), which the child's controller
	// reports only as an event on the child; the message is the API
	// server's own. It may clear without a change of the spec (quota
	// freed, a policy changed), so the object keeps trying.
	ReasonPodsRefused = "PodsRefused"
	// ReasonNameTaken: an object of a name the operator derives for a
	// child (a Secret, a Job, a claim) exists and is not the operator's;
	// it is never adopted, changed or read. Deleting or renaming it, or
	// renaming the owner, fixes it.
	ReasonNameTaken = "NameTaken"
	// ReasonNamespaceReserved: the object is in one of the cluster's own
	// namespaces (kube-system, kube-public, kube-node-lease, any kube-*),
	// where the platform's operators create nothing (their admission
	// policy refuses them every write there). Only creating the object in
	// another namespace fixes it.
	ReasonNamespaceReserved = "NamespaceReserved"
)

// Annotation suffixes shared by every ml-platform kind. The full key carries
// the API group of the operator that owns the object as its prefix, for
// example "features.mlplatform.dev/abandon-cleanup".
const (
	// AnnotationAbandonCleanup, set to "true" by a user authorized for the
	// "abandon-cleanup" verb on the resource, makes the operator release its
	// finalizer without cleaning up external resources. An admission policy
	// shipped with every chart refuses it from anybody else.
	AnnotationAbandonCleanup = "abandon-cleanup"
)
