package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
)

// Annotations a user sets on a Notebook to ask for an action. The operator
// never writes spec, so one-off actions are requests by annotation: each
// fires once per distinct value, and the operator records the value it
// handled on the Notebook's StatefulSet.
const (
	// AnnotationRestart starts a culled Notebook again. Set it to a new
	// value each time, for example the current date:
	//   kubectl annotate notebook NAME notebooks.mlplatform.dev/restart="$(date -Is)" --overwrite
	AnnotationRestart = "notebooks.mlplatform.dev/restart"
	// AnnotationForceUpdate applies a spec change that was deferred because
	// a kernel is busy, restarting the Jupyter server at once. Set it to a
	// new value each time, like AnnotationRestart.
	AnnotationForceUpdate = "notebooks.mlplatform.dev/force-update"
)

// Condition types of a Notebook besides the shared Ready, Reconciling,
// Stalled and Suspended.
const (
	// ConditionCulled is True while the operator has stopped the Notebook
	// for idleness or for reaching its maximum lifetime.
	ConditionCulled = "Culled"
	// ConditionUpdatePending is True while a spec change that restarts the
	// Jupyter server waits for its kernels to become idle.
	ConditionUpdatePending = "UpdatePending"
	// ConditionFeatureStoresReady is True when every referenced
	// FeatureStore is Ready and its client configuration is mounted.
	ConditionFeatureStoresReady = "FeatureStoresReady"
	// ConditionQueued is True while Kueue holds the Jupyter server's pod in
	// the Notebook's queue, with Kueue's own reason (Pending, Preempted
	// ...) and message; False with reason Admitted once Kueue admitted it.
	// It is absent for a Notebook without a queue or while it is stopped.
	ConditionQueued = "Queued"
	// ConditionWorkspaceResizePending is True while spec.workspace.size is
	// larger than the workspace claim asks for, with reason
	// WorkspaceNotBound or WorkspaceResizeRefused; it is absent otherwise.
	// It never holds up the rest of the Notebook: the server runs, stops
	// and is culled on the workspace it has.
	ConditionWorkspaceResizePending = "WorkspaceResizePending"
)

// Condition and event reasons of a Notebook.
const (
	ReasonIdle               = "Idle"
	ReasonMaxLifetime        = "MaxLifetime"
	ReasonCullWarning        = "CullWarning"
	ReasonRestarted          = "Restarted"
	ReasonKernelBusy         = "KernelBusy"
	ReasonUpdateApplied      = "UpdateApplied"
	ReasonSuspended          = "Suspended"
	ReasonRunning            = "Running"
	ReasonStarting           = "Starting"
	ReasonJupyterNotReady    = "JupyterNotAnswering"
	ReasonPodStartFailed     = "PodStartFailed"
	ReasonInvalidAccelerator = "InvalidAccelerator"
	ReasonAdmitted           = "Admitted"
	ReasonQueued             = "Queued"
	// ReasonWorkspaceNotBound: the workspace claim is not bound to a
	// volume yet (a storage class that binds when the pod first starts,
	// while the Notebook is queued or suspended). A claim's size can only
	// change once it is bound; the operator grows it then.
	ReasonWorkspaceNotBound = "WorkspaceNotBound"
	// ReasonWorkspaceResizeRefused: the API server refused to grow the
	// bound claim, typically because its StorageClass does not allow
	// volume expansion; the message is the API server's. The operator
	// tries again at each reconcile.
	ReasonWorkspaceResizeRefused = "WorkspaceResizeRefused"
)

// Phase is a one-word summary of a Notebook for people and printer columns.
// Conditions are the API; Phase is derived from them.
// +kubebuilder:validation:Enum=Pending;Queued;Running;Suspended;Culled;Failed
type Phase string

// Phases of a Notebook.
const (
	PhasePending Phase = "Pending"
	// PhaseQueued: Kueue holds the Jupyter server's pod until its queue
	// has quota for it.
	PhaseQueued    Phase = "Queued"
	PhaseRunning   Phase = "Running"
	PhaseSuspended Phase = "Suspended"
	PhaseCulled    Phase = "Culled"
	PhaseFailed    Phase = "Failed"
)

// NotebookSpec is what the user asks for.
// +kubebuilder:validation:XValidation:rule="!has(self.volumeMounts) || self.volumeMounts.all(m, m.mountPath != self.workspace.mountPath && m.mountPath != '/tmp')",message="volumeMounts may not use the workspace mountPath or /tmp: the operator mounts the workspace and a scratch /tmp there"
type NotebookSpec struct {
	// Image of the Jupyter server. It must start Jupyter on port 8888 with
	// the base URL in $NB_PREFIX and the token in $JUPYTER_TOKEN, as the
	// Kubeflow and Jupyter Docker Stacks images do. Empty means the image
	// the platform team configured.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Image string `json:"image,omitempty"`

	// Resources of the Jupyter container, with accelerators. Quantities
	// the API server would refuse in the StatefulSet's pod template
	// (negative, or requests above limits) are refused at once, by the
	// rules of the Resources type.
	// +optional
	Resources commonv1alpha1.Resources `json:"resources,omitempty"`

	// Env adds environment variables to the Jupyter container.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(e, !(e.name in ['JUPYTER_TOKEN', 'NB_PREFIX', 'JUPYTER_PORT', 'HOME']))",message="env may not set JUPYTER_TOKEN, NB_PREFIX, JUPYTER_PORT or HOME: the operator sets them"
	// +listType=map
	// +listMapKey=name
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`

	// Volumes adds volumes to the pod, mounted with VolumeMounts.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(v, v.name != 'workspace' && v.name != 'tmp' && !v.name.startsWith('featurestore-'))",message="volume names workspace, tmp and featurestore-* are reserved for the operator"
	// +listType=map
	// +listMapKey=name
	// +optional
	Volumes []corev1.Volume `json:"volumes,omitempty"`

	// VolumeMounts mounts Volumes into the Jupyter container. Each must
	// name an entry of Volumes (checked by the operator: the rule is too
	// costly for CEL over corev1 types without length limits).
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=mountPath
	// +optional
	VolumeMounts []corev1.VolumeMount `json:"volumeMounts,omitempty"`

	// PodTemplate customises scheduling and identity of the pod.
	// +optional
	PodTemplate *PodTemplate `json:"podTemplate,omitempty"`

	// Workspace is the persistent volume mounted as the home folder.
	// +kubebuilder:default={}
	// +optional
	Workspace Workspace `json:"workspace,omitempty"`

	// Suspend stops the Jupyter server and keeps the workspace. Setting it
	// back to false starts the server again. The name and meaning match
	// TrainingJob's spec.suspend (and batch/v1 Job's).
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// Culling stops the server after a period without kernel or terminal
	// activity, or after a maximum lifetime. Unset fields take the platform
	// team's defaults; values beyond the platform's upper bounds are
	// lowered to them (status.culling shows the values in force).
	// +optional
	Culling Culling `json:"culling,omitempty"`

	// FeatureStores whose Feast client configuration is mounted into the
	// pod. A missing or not Ready store is reported in the
	// FeatureStoresReady condition and does not block the Notebook; it is
	// mounted once Ready.
	// +kubebuilder:validation:MaxItems=8
	// +listType=map
	// +listMapKey=name
	// +optional
	FeatureStores []commonv1alpha1.FeatureStoreReference `json:"featureStores,omitempty"`

	// QueueName is the Kueue LocalQueue that admits the Notebook's pod, set
	// as the kueue.x-k8s.io/queue-name label on the StatefulSet and its pod
	// so GPU notebooks can wait for quota.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	QueueName string `json:"queueName,omitempty"`

	// Access adds sources allowed to reach the Jupyter server, besides the
	// ingress path and the operator's prober that the platform allows.
	// +optional
	Access *Access `json:"access,omitempty"`
}

// PodTemplate holds the pod settings a user may change.
type PodTemplate struct {
	// Tolerations of the Jupyter pod, added to those of the accelerator
	// type it requests.
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// NodeSelector of the Jupyter pod, merged with the node labels of the
	// accelerator type it requests.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// ServiceAccountName the pod runs as; empty means the namespace's
	// default ServiceAccount.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// PriorityClassName of the Jupyter pod; empty means the cluster's
	// default priority.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// ImagePullSecrets name Secrets of the Notebook's namespace that
	// hold credentials for pulling the notebook image.
	// +kubebuilder:validation:MaxItems=8
	// +listType=map
	// +listMapKey=name
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
}

// Workspace is the persistent home folder.
// +kubebuilder:validation:XValidation:rule="has(self.storageClassName) == has(oldSelf.storageClassName)",message="workspace.storageClassName cannot be added or removed after creation"
type Workspace struct {
	// Size of the volume. It may grow, when the storage class allows
	// volume expansion: the operator grows the claim once it is bound to a
	// volume, and until then, or when the API server refuses (a class
	// without allowVolumeExpansion), reports it in the
	// WorkspaceResizePending condition while the Notebook keeps running on
	// the workspace it has. It never shrinks below the claim's size
	// (status.workspace.size), so a growth that cannot happen can be taken
	// back to it.
	// +kubebuilder:default="10Gi"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity('1Mi')) >= 0",message="workspace.size must be at least 1Mi"
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`

	// StorageClassName of the volume; unset means the cluster default.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="workspace.storageClassName is immutable"
	// +kubebuilder:validation:MaxLength=253
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`

	// MountPath of the workspace in the Jupyter container; it is also
	// $HOME.
	// +kubebuilder:default="/home/jovyan"
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/') && self != '/' && self != '/tmp' && !self.startsWith('/tmp/') && !self.contains('..')",message="workspace.mountPath must be an absolute path other than /, /tmp and without '..'"
	// +optional
	MountPath string `json:"mountPath,omitempty"`

	// DeletionPolicy says what happens to the volume when the Notebook is
	// deleted: Retain keeps it (a Notebook of the same name created later
	// uses it again), Delete removes it.
	// +kubebuilder:default=Retain
	// +optional
	DeletionPolicy commonv1alpha1.DeletionPolicy `json:"deletionPolicy,omitempty"`
}

// Culling configures when the operator stops an unused Notebook.
//
// Activity is the latest kernel or terminal activity Jupyter reports; a
// kernel executing code is activity now. An open browser tab does not count
// by itself: JupyterLab polls the server's REST API every few seconds, so
// counting those requests would keep every forgotten tab alive forever.
// Typing in a notebook or terminal, or running a cell, does count. The
// operator's own probes never count (they ask Jupyter not to track them).
// A notebook is warned (an event and status.cullDeadline) at least the
// platform's warning period before it is stopped; a probe that fails never
// stops a notebook.
type Culling struct {
	// Enabled turns idle culling on or off; unset means the platform
	// default.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// IdleTimeout is how long the server may go without kernel or terminal
	// activity before it is stopped.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('5m')",message="culling.idleTimeout must be at least 5m"
	// +optional
	IdleTimeout *metav1.Duration `json:"idleTimeout,omitempty"`

	// CheckPeriod is how often activity is checked.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10s') && duration(self) <= duration('1h')",message="culling.checkPeriod must be between 10s and 1h"
	// +optional
	CheckPeriod *metav1.Duration `json:"checkPeriod,omitempty"`

	// MaxLifetime stops the server this long after it started, whatever
	// its activity, whether or not idle culling is enabled.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10m')",message="culling.maxLifetime must be at least 10m"
	// +optional
	MaxLifetime *metav1.Duration `json:"maxLifetime,omitempty"`
}

// Access lists extra sources allowed to reach the Jupyter server.
type Access struct {
	// AllowFrom are NetworkPolicy peers (pods, namespaces or IP blocks)
	// allowed to connect to the server's port.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	AllowFrom []networkingv1.NetworkPolicyPeer `json:"allowFrom,omitempty"`
}

// CullingStatus shows the culling settings in force after platform defaults
// and bounds were applied.
type CullingStatus struct {
	// IdleTimeout in force; unset when idle culling is off.
	// +optional
	IdleTimeout *metav1.Duration `json:"idleTimeout,omitempty"`
	// MaxLifetime in force; unset when there is none.
	// +optional
	MaxLifetime *metav1.Duration `json:"maxLifetime,omitempty"`
}

// NotebookStatus is what the operator observed.
type NotebookStatus struct {
	// ObservedGeneration is the metadata.generation the status describes;
	// while it is lower, the operator has not yet acted on the latest spec.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready (the pod is ready and Jupyter answers), Suspended,
	// Culled, UpdatePending, FeatureStoresReady, WorkspaceResizePending,
	// Reconciling, Stalled.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Phase summarises the conditions in one word.
	// +optional
	Phase Phase `json:"phase,omitempty"`

	// Image the server runs (spec.image or the platform default).
	// +optional
	Image string `json:"image,omitempty"`

	// URL of the server inside the cluster.
	// +optional
	URL string `json:"url,omitempty"`

	// IngressURL of the server, when the platform exposes notebooks
	// through an Ingress.
	// +optional
	IngressURL string `json:"ingressURL,omitempty"`

	// TokenSecretName is the Secret whose "token" key holds the access
	// token. The token itself is never in status.
	// +optional
	TokenSecretName string `json:"tokenSecretName,omitempty"`

	// WorkspaceClaimName is the PersistentVolumeClaim of the workspace.
	// +optional
	WorkspaceClaimName string `json:"workspaceClaimName,omitempty"`

	// LastActivity is the latest kernel or terminal activity seen. It is
	// refreshed at most once per report interval of the platform (10
	// minutes by default), so it may lag by that much.
	// +optional
	LastActivity *metav1.Time `json:"lastActivity,omitempty"`

	// CullDeadline is when the server will be stopped unless it is used
	// again; set when the warning was given.
	// +optional
	CullDeadline *metav1.Time `json:"cullDeadline,omitempty"`

	// Culling shows the culling settings in force.
	// +optional
	Culling *CullingStatus `json:"culling,omitempty"`

	// Queue is where the Jupyter server waits while Kueue has not admitted
	// it; absent otherwise.
	// +optional
	Queue *commonv1alpha1.QueueStatus `json:"queue,omitempty"`

	// Workspace is the workspace claim's size as the operator last saw it.
	// +optional
	Workspace *WorkspaceStatus `json:"workspace,omitempty"`
}

// WorkspaceStatus compares what the workspace claim asks for with the
// volume it has; both can lag spec.workspace.size (see its doc).
type WorkspaceStatus struct {
	// Size the workspace claim asks for.
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`
	// Capacity of the volume bound to the claim; unset until it is bound.
	// It is below size while the volume is being expanded.
	// +optional
	Capacity *resource.Quantity `json:"capacity,omitempty"`
}

// Notebook is a Jupyter server with a persistent workspace.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=mlplatform,shortName=mlnb
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Position",type=integer,JSONPath=`.status.queue.position`,description="Place in the Kueue LocalQueue while queued"
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.status.image`
// +kubebuilder:printcolumn:name="Last Activity",type=date,JSONPath=`.status.lastActivity`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Cull Deadline",type=string,JSONPath=`.status.cullDeadline`,priority=1,description="When the idle server will be stopped"
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.status.url`,priority=1,description="In-cluster URL of the server"
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 52",message="Notebook names are at most 52 characters, so the names of the StatefulSet's pods and the workspace claim fit"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="Notebook names are DNS-1035 labels (lower-case letters, digits and '-', starting with a letter, no dots): the Notebook's Service and StatefulSet take its name"
// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.workspace) || !has(self.spec.workspace.size) || !has(oldSelf.spec) || !has(oldSelf.spec.workspace) || !has(oldSelf.spec.workspace.size) || quantity(string(self.spec.workspace.size)).compareTo(quantity(string(oldSelf.spec.workspace.size))) >= 0 || (has(self.status) && has(self.status.workspace) && has(self.status.workspace.size) && quantity(string(self.spec.workspace.size)).compareTo(quantity(string(self.status.workspace.size))) >= 0)",message="spec.workspace.size cannot shrink below the workspace claim's size (status.workspace.size): a volume never shrinks"
type Notebook struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec NotebookSpec `json:"spec,omitempty"`
	// +optional
	Status NotebookStatus `json:"status,omitempty"`
}

// GetConditions returns the status conditions.
func (n *Notebook) GetConditions() []metav1.Condition { return n.Status.Conditions }

// SetConditions replaces the status conditions.
func (n *Notebook) SetConditions(c []metav1.Condition) { n.Status.Conditions = c }

// NotebookList is a list of Notebooks.
// +kubebuilder:object:root=true
type NotebookList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Notebook `json:"items"`
}
