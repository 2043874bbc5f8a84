package render

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"path"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/config"
	"github.com/ml-platform/ml-platform/shared/accelerator"
	"github.com/ml-platform/ml-platform/shared/featureref"
	"github.com/ml-platform/ml-platform/shared/manager"
	"github.com/ml-platform/ml-platform/shared/podsecurity"
)

// OperatorName is the operator's name: the field manager of its writes and
// the managed-by label of everything it creates.
const OperatorName = "notebook-operator"

// Labels and annotations on the objects a Notebook owns.
const (
	// LabelName names the Notebook an object belongs to; it selects the
	// pod, and maps pods and the retained workspace back to the Notebook.
	LabelName = "notebooks.mlplatform.dev/name"
	// LabelQueueName is Kueue's queue label.
	LabelQueueName = "kueue.x-k8s.io/queue-name"
	// AnnotationAppliedHash is the hash of everything the operator applies
	// to an object (apply.Applier.HashAnnotation).
	AnnotationAppliedHash = "notebooks.mlplatform.dev/applied-hash"
	// AnnotationTemplateHash is the hash of the generated pod template; a
	// change restarts the pod and may be deferred while a kernel is busy.
	AnnotationTemplateHash = "notebooks.mlplatform.dev/template-hash"
)

// Annotations on the StatefulSet that record the operator's decisions, so
// that they are durable and never re-inferred from a cache.
const (
	// AnnotationStartedAt is when the operator last started the server; it
	// starts maxLifetime.
	AnnotationStartedAt = "notebooks.mlplatform.dev/started-at"
	// AnnotationCulled holds the reason of a cull while the server stays
	// stopped for it; AnnotationCulledAt when it happened.
	AnnotationCulled   = "notebooks.mlplatform.dev/culled"
	AnnotationCulledAt = "notebooks.mlplatform.dev/culled-at"
	// AnnotationRestartHandled and AnnotationForceUpdateHandled hold the
	// values of the Notebook's request annotations already acted on.
	AnnotationRestartHandled     = "notebooks.mlplatform.dev/restart-handled"
	AnnotationForceUpdateHandled = "notebooks.mlplatform.dev/force-update-handled"
)

// Container, port and volume names of the generated pod.
const (
	ContainerName = "notebook"
	PortName      = "http"
	Port          = 8888
	ServicePort   = 80
	TokenKey      = "token"
	workspaceVol  = "workspace"
	tmpVol        = "tmp"
)

// Input is what the generated objects depend on besides the Notebook.
type Input struct {
	Notebook *notebooksv1alpha1.Notebook
	Config   config.Config
	// Accelerator is the resolved accelerator class, nil for none.
	Accelerator *accelerator.Class
	// Stores are the Ready FeatureStores to mount.
	Stores []featureref.Store
}

// TokenSecretName is the Secret holding the access token.
func TokenSecretName(nb *notebooksv1alpha1.Notebook) string { return nb.Name + "-token" }

// WorkspaceClaimName is the workspace PersistentVolumeClaim.
func WorkspaceClaimName(nb *notebooksv1alpha1.Notebook) string { return nb.Name + "-workspace" }

// BasePath is the URL path Jupyter serves under, the same behind the
// Service and the Ingress.
func BasePath(nb *notebooksv1alpha1.Notebook) string {
	return "/notebook/" + nb.Namespace + "/" + nb.Name + "/"
}

// URL is the server's in-cluster URL.
func URL(nb *notebooksv1alpha1.Notebook, cfg config.Config) string {
	return fmt.Sprintf("http://%s.%s.svc.%s%s", nb.Name, nb.Namespace, cfg.ClusterDomain, BasePath(nb))
}

// IngressURL is the server's URL through the Ingress, empty without one.
func IngressURL(nb *notebooksv1alpha1.Notebook, cfg config.Config) string {
	if !cfg.Ingress.Enabled {
		return ""
	}
	scheme := "http"
	if cfg.Ingress.TLSSecretName != "" {
		scheme = "https"
	}
	return scheme + "://" + cfg.Ingress.Host + BasePath(nb)
}

// Image is the image the server runs.
func Image(nb *notebooksv1alpha1.Notebook, cfg config.Config) string {
	if nb.Spec.Image != "" {
		return nb.Spec.Image
	}
	return cfg.DefaultImage
}

// SelectorLabels select the Notebook's pod.
func SelectorLabels(nb *notebooksv1alpha1.Notebook) map[string]string {
	return map[string]string{LabelName: nb.Name}
}

// labels go on every owned object: the managed-by label puts it into the
// operator's label-restricted cache.
func labels(nb *notebooksv1alpha1.Notebook) map[string]string {
	l := manager.ManagedByLabels(OperatorName)
	maps.Copy(l, SelectorLabels(nb))
	l["app.kubernetes.io/name"] = "notebook"
	l["app.kubernetes.io/instance"] = nb.Name
	return l
}

func objectMeta(nb *notebooksv1alpha1.Notebook, name string, owned bool) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Name: name, Namespace: nb.Namespace, Labels: labels(nb)}
	if owned {
		m.OwnerReferences = []metav1.OwnerReference{OwnerReference(nb)}
	}
	return m
}

// OwnerReference makes the Notebook the controller of an object, so that
// the garbage collector deletes it with the Notebook.
func OwnerReference(nb *notebooksv1alpha1.Notebook) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion:         notebooksv1alpha1.GroupVersion.String(),
		Kind:               "Notebook",
		Name:               nb.Name,
		UID:                nb.UID,
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}
}

// PodTemplate is the generated pod template. It depends only on the spec,
// the configuration and the resolved stores and accelerator, never on time
// or on the operator's own state, so that an unchanged Notebook keeps its
// pod across operator upgrades (the golden files guard this).
func PodTemplate(in Input) corev1.PodTemplateSpec {
	nb := in.Notebook
	container := jupyterContainer(in)
	pod := podSpec(in)
	if acc := nb.Spec.Resources.Accelerators; acc != nil {
		accelerator.Apply(in.Accelerator, acc.Count, &pod, &container)
	}
	pod.Containers = []corev1.Container{container}
	featureref.Mount(&pod, []string{ContainerName}, in.Stores)

	podLabels := labels(nb)
	if nb.Spec.QueueName != "" {
		podLabels[LabelQueueName] = nb.Spec.QueueName
	}
	featureref.Bind(podLabels, in.Stores)
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: podLabels}, Spec: pod}
}

// jupyterContainer is the notebook server's container.
func jupyterContainer(in Input) corev1.Container {
	nb, cfg := in.Notebook, in.Config
	spec := nb.Spec
	ws := spec.Workspace
	env := []corev1.EnvVar{
		{Name: "NB_PREFIX", Value: BasePath(nb)},
		{Name: "JUPYTER_PORT", Value: fmt.Sprint(Port)},
		{Name: "HOME", Value: ws.MountPath},
		// The token reaches Jupyter through the environment, from the
		// Secret: never as an argument, which any process on the node
		// could read.
		{Name: "JUPYTER_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: TokenSecretName(nb)},
			Key:                  TokenKey,
		}}},
	}
	return corev1.Container{
		Name:            ContainerName,
		Image:           Image(nb, cfg),
		ImagePullPolicy: cfg.ImagePullPolicy,
		Ports:           []corev1.ContainerPort{{Name: PortName, ContainerPort: Port, Protocol: corev1.ProtocolTCP}},
		Env:             append(env, spec.Env...),
		Resources:       *spec.Resources.ResourceRequirements.DeepCopy(),
		VolumeMounts: append([]corev1.VolumeMount{
			{Name: workspaceVol, MountPath: ws.MountPath},
			// The root filesystem is read-only: scratch space is a volume.
			{Name: tmpVol, MountPath: "/tmp"},
		}, spec.VolumeMounts...),
		// /api answers without a token and is not counted as activity.
		ReadinessProbe: &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: path.Join(BasePath(nb), "api"), Port: intstr.FromString(PortName),
			}},
			PeriodSeconds:    10,
			FailureThreshold: 3,
		},
		SecurityContext: podsecurity.ContainerSecurityContext(),
	}
}

// podSpec is the pod without its container: volumes, security and what
// the Notebook's podTemplate sets.
func podSpec(in Input) corev1.PodSpec {
	nb := in.Notebook
	pod := corev1.PodSpec{
		SecurityContext:    podsecurity.PodSecurityContext(in.Config.UID),
		EnableServiceLinks: ptr.To(false),
		// A notebook talks to the Kubernetes API only when its user gave it
		// a ServiceAccount for that.
		AutomountServiceAccountToken: ptr.To(false),
		Volumes: append([]corev1.Volume{
			{Name: workspaceVol, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: WorkspaceClaimName(nb)}}},
			{Name: tmpVol, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		}, nb.Spec.Volumes...),
	}
	pt := nb.Spec.PodTemplate
	if pt == nil {
		return pod
	}
	pod.Tolerations = append(pod.Tolerations, pt.Tolerations...)
	if len(pt.NodeSelector) > 0 {
		pod.NodeSelector = maps.Clone(pt.NodeSelector)
	}
	pod.Affinity = pt.Affinity.DeepCopy()
	pod.PriorityClassName = pt.PriorityClassName
	pod.ImagePullSecrets = append(pod.ImagePullSecrets, pt.ImagePullSecrets...)
	if pt.ServiceAccountName != "" {
		pod.ServiceAccountName = pt.ServiceAccountName
		pod.AutomountServiceAccountToken = nil
	}
	return pod
}

// Hash is a short stable digest of v's JSON form.
func Hash(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("render: hashing %T: %v", v, err))
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])[:16]
}

// StatefulSetState is the operator's decisions the StatefulSet records.
type StatefulSetState struct {
	Replicas int32
	// Annotations are the decision annotations (AnnotationStartedAt ...).
	Annotations map[string]string
	// Template, when set, is the pod template to keep instead of the
	// generated one (a deferred update), with its hash.
	Template     *corev1.PodTemplateSpec
	TemplateHash string
}

// StatefulSet runs the Jupyter server: one replica, or none while the
// Notebook is suspended or culled.
func StatefulSet(in Input, state StatefulSetState) *appsv1.StatefulSet {
	nb := in.Notebook
	tpl, hash := PodTemplate(in), ""
	if state.Template != nil {
		tpl, hash = *state.Template, state.TemplateHash
	} else {
		hash = Hash(tpl)
	}
	sts := &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: objectMeta(nb, nb.Name, true),
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To(state.Replicas),
			ServiceName: nb.Name,
			Selector:    &metav1.LabelSelector{MatchLabels: SelectorLabels(nb)},
			Template:    tpl,
		},
	}
	if nb.Spec.QueueName != "" {
		sts.Labels[LabelQueueName] = nb.Spec.QueueName
	}
	sts.Annotations = maps.Clone(state.Annotations)
	if sts.Annotations == nil {
		sts.Annotations = map[string]string{}
	}
	sts.Annotations[AnnotationTemplateHash] = hash
	return sts
}

// Service gives the server a stable name.
func Service(in Input) *corev1.Service {
	nb := in.Notebook
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: objectMeta(nb, nb.Name, true),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: SelectorLabels(nb),
			Ports: []corev1.ServicePort{{
				Name: PortName, Port: ServicePort, TargetPort: intstr.FromString(PortName), Protocol: corev1.ProtocolTCP,
			}},
		},
	}
	return svc
}

// TokenSecret holds the access token. The token is generated once by the
// caller and never changes while the Secret exists.
func TokenSecret(nb *notebooksv1alpha1.Notebook, token string) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: objectMeta(nb, TokenSecretName(nb), true),
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{TokenKey: []byte(token)},
	}
}

// WorkspaceSize is the size the Notebook asks for its workspace.
func WorkspaceSize(nb *notebooksv1alpha1.Notebook) resource.Quantity {
	if nb.Spec.Workspace.Size != nil {
		return *nb.Spec.Workspace.Size
	}
	return resource.MustParse("10Gi")
}

// WorkspaceClaim is the workspace volume claim, asking for size: the
// caller decides it, because a claim's size can change only when the
// cluster can grow its volume. With deletionPolicy Delete the Notebook owns
// it and the garbage collector deletes it with the Notebook; with Retain it
// has no owner and outlives the Notebook, and a Notebook of the same name
// created later mounts it again.
func WorkspaceClaim(in Input, size resource.Quantity) *corev1.PersistentVolumeClaim {
	nb := in.Notebook
	ws := nb.Spec.Workspace
	owned := ws.DeletionPolicy == commonv1alpha1.DeletionPolicyDelete
	pvc := &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: objectMeta(nb, WorkspaceClaimName(nb), owned),
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ws.StorageClassName,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}
	return pvc
}

// NetworkPolicy admits only the operator's prober, the ingress path the
// platform configured and the Notebook's own spec.access.allowFrom to the
// server's port; with egress on, it also lets the pods reach only the
// cluster's DNS, the managed servers of the FeatureStores the Notebook
// references and the platform's destinations. It returns nil when the
// platform turned both off.
func NetworkPolicy(in Input) *networkingv1.NetworkPolicy {
	nb, cfg := in.Notebook, in.Config.NetworkPolicy
	if !cfg.Enabled && !cfg.Egress.Enabled {
		return nil
	}
	np := &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: objectMeta(nb, nb.Name, true),
		Spec:       networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: SelectorLabels(nb)}},
	}
	if cfg.Enabled {
		np.Spec.PolicyTypes = append(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress)
		np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{ingressRule(nb, cfg)}
	}
	if cfg.Egress.Enabled {
		np.Spec.PolicyTypes = append(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
		np.Spec.Egress = egressRules(nb, cfg.Egress)
	}
	return np
}

func ingressRule(nb *notebooksv1alpha1.Notebook, cfg config.NetworkPolicy) networkingv1.NetworkPolicyIngressRule {
	from := []networkingv1.NetworkPolicyPeer{{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: cfg.OperatorNamespace}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: maps.Clone(cfg.OperatorPodLabels)},
	}}
	from = append(from, cfg.IngressFrom...)
	if nb.Spec.Access != nil {
		from = append(from, nb.Spec.Access.AllowFrom...)
	}
	return networkingv1.NetworkPolicyIngressRule{
		From:  from,
		Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(Port))}},
	}
}

// egressRules are the DNS rule, the rule to the referenced FeatureStores'
// managed servers (none without references) and the platform's own. The
// Notebook's user chooses only which FeatureStores of its namespace to
// reference: nothing in its spec opens another destination.
func egressRules(nb *notebooksv1alpha1.Notebook, cfg config.Egress) []networkingv1.NetworkPolicyEgressRule {
	rules := []networkingv1.NetworkPolicyEgressRule{{
		To: []networkingv1.NetworkPolicyPeer{{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: cfg.DNS.Namespace}},
			PodSelector:       &metav1.LabelSelector{MatchLabels: maps.Clone(cfg.DNS.PodLabels)},
		}},
		Ports: []networkingv1.NetworkPolicyPort{
			{Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To(intstr.FromInt32(53))},
			{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(53))},
		},
	}}
	if stores := featureref.ServerEgress(nb.Spec.FeatureStores); stores != nil {
		rules = append(rules, *stores)
	}
	for _, r := range cfg.To {
		rules = append(rules, *r.DeepCopy())
	}
	return rules
}

// Ingress exposes the server under BasePath on the platform's host. It
// returns nil when the platform configured no Ingress.
func Ingress(in Input) *networkingv1.Ingress {
	nb, cfg := in.Notebook, in.Config.Ingress
	if !cfg.Enabled {
		return nil
	}
	ing := &networkingv1.Ingress{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"},
		ObjectMeta: objectMeta(nb, nb.Name, true),
		Spec: networkingv1.IngressSpec{
			Rules: []networkingv1.IngressRule{{
				Host: cfg.Host,
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
					Paths: []networkingv1.HTTPIngressPath{{
						Path:     BasePath(nb),
						PathType: ptr.To(networkingv1.PathTypePrefix),
						Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
							Name: nb.Name, Port: networkingv1.ServiceBackendPort{Name: PortName},
						}},
					}},
				}},
			}},
		},
	}
	if cfg.ClassName != "" {
		ing.Spec.IngressClassName = ptr.To(cfg.ClassName)
	}
	if cfg.TLSSecretName != "" {
		ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{cfg.Host}, SecretName: cfg.TLSSecretName}}
	}
	if len(cfg.Annotations) > 0 {
		ing.Annotations = maps.Clone(cfg.Annotations)
	}
	return ing
}
