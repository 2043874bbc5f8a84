// Package kube is the CLI's session with the cluster: our kinds, addressed
// by full group and version, read and written as unstructured, and API
// errors said in words a user can act on.
package kube

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
)

// Kind is one of our resources. Objects are read and written as
// unstructured, always with the full group and version, so that fields added
// to the API after this client was built survive a round trip and the
// same-named resources of Kubeflow (notebooks.kubeflow.org) and Feast
// (featurestores.feast.dev) are never addressed by mistake.
type Kind struct {
	GVK      schema.GroupVersionKind
	Resource string
	// Operator names the operator that installs the CRD, for the error
	// printed when it is missing.
	Operator string
	// Command is the mlp command group of the kind, for examples.
	Command string
}

// The kinds of ml-platform the CLI works on.
var (
	TrainingJobKind = Kind{
		GVK:      trainingv1alpha1.GroupVersion.WithKind("TrainingJob"),
		Resource: "trainingjobs",
		Operator: "TrainingJob operator",
		Command:  "train",
	}
	NotebookKind = Kind{
		GVK:      notebooksv1alpha1.GroupVersion.WithKind("Notebook"),
		Resource: "notebooks",
		Operator: "Notebook operator",
		Command:  "notebook",
	}
	FeatureStoreKind = Kind{
		GVK:      featuresv1alpha1.GroupVersion.WithKind("FeatureStore"),
		Resource: "featurestores",
		Operator: "FeatureStore operator",
		Command:  "featurestore",
	}
)

// GVR is the kind's resource with its group and version.
func (k Kind) GVR() schema.GroupVersionResource { return k.GVK.GroupVersion().WithResource(k.Resource) }

// Qualified is the resource with its group, as kubectl names it.
func (k Kind) Qualified() string { return k.Resource + "." + k.GVK.Group }

// Empty is an object of the kind to read into.
func (k Kind) Empty() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(k.GVK)
	return u
}

// EmptyList is a list of the kind to read into.
func (k Kind) EmptyList() *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(k.GVK.GroupVersion().WithKind(k.GVK.Kind + "List"))
	return l
}

// Session is what a command needs to talk to the cluster.
type Session struct {
	C         ctrlclient.Client
	CS        kubernetes.Interface
	Dyn       dynamic.Interface
	Cfg       *rest.Config
	Namespace string
	// ExplicitNamespace is true when -n was given.
	ExplicitNamespace bool
}

// NewScheme knows the built-in kinds and ours.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, trainingv1alpha1.AddToScheme,
		notebooksv1alpha1.AddToScheme, featuresv1alpha1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err) // The schemes are static: this is a programming error.
		}
	}
	return s
}

// NewSession reads the kubeconfig the flags chose and checks, within
// connectTimeout (or --request-timeout), that the cluster answers at all,
// so that an unreachable cluster is said in one line at once instead of as
// every API call's own timeout.
func NewSession(ctx context.Context, flags *genericclioptions.ConfigFlags, connectTimeout time.Duration) (*Session, error) {
	cfg, err := flags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig: %w", err)
	}
	if err := probe(ctx, cfg, connectTimeout); err != nil {
		return nil, err
	}
	ns, explicit, err := flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, fmt.Errorf("reading the namespace from the kubeconfig: %w", err)
	}
	if flags.Namespace != nil && *flags.Namespace != "" {
		explicit = true
	}
	c, err := ctrlclient.New(cfg, ctrlclient.Options{Scheme: NewScheme()})
	if err != nil {
		return nil, fmt.Errorf("connecting to the cluster: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to the cluster: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to the cluster: %w", err)
	}
	return &Session{C: c, CS: cs, Dyn: dyn, Cfg: cfg, Namespace: ns, ExplicitNamespace: explicit}, nil
}

// Get reads one object of kind k in the session's namespace.
func (s *Session) Get(ctx context.Context, k Kind, name string) (*unstructured.Unstructured, error) {
	u := k.Empty()
	if err := s.C.Get(ctx, ctrlclient.ObjectKey{Namespace: s.Namespace, Name: name}, u); err != nil {
		return nil, Explain(err, k, "get", name, s.Namespace)
	}
	return u, nil
}

// List lists the objects of kind k in the session's namespace.
func (s *Session) List(ctx context.Context, k Kind, opts ...ctrlclient.ListOption) ([]unstructured.Unstructured, error) {
	l, err := s.ListIn(ctx, k, s.Namespace, opts...)
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// ListIn lists in one namespace, or in all with metav1.NamespaceAll.
func (s *Session) ListIn(ctx context.Context, k Kind, namespace string, opts ...ctrlclient.ListOption) (*unstructured.UnstructuredList, error) {
	l := k.EmptyList()
	if err := s.C.List(ctx, l, append([]ctrlclient.ListOption{ctrlclient.InNamespace(namespace)}, opts...)...); err != nil {
		return nil, Explain(err, k, "list", "", namespace)
	}
	return l, nil
}

// MergePatch sends a JSON merge patch of spec or metadata fields.
func (s *Session) MergePatch(ctx context.Context, k Kind, name string, patch []byte) (*unstructured.Unstructured, error) {
	u := k.Empty()
	u.SetNamespace(s.Namespace)
	u.SetName(name)
	if err := s.C.Patch(ctx, u, ctrlclient.RawPatch("application/merge-patch+json", patch), ctrlclient.FieldValidation("Strict")); err != nil {
		return nil, Explain(err, k, "patch", name, s.Namespace)
	}
	return u, nil
}

// Typed converts an unstructured object of ours into its Go type. Fields
// this client does not know are ignored here but kept in the unstructured
// object, which is what -o json|yaml prints.
func Typed[T any](u *unstructured.Unstructured) (*T, error) {
	var out T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &out); err != nil {
		return nil, fmt.Errorf("reading %s %q: %w", u.GetKind(), u.GetName(), err)
	}
	return &out, nil
}

// Key is the key of the object name in namespace.
func Key(namespace, name string) ctrlclient.ObjectKey {
	return ctrlclient.ObjectKey{Namespace: namespace, Name: name}
}

// PodReady says whether the pod's Ready condition is True.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// EventTime is when an event last happened, whichever of its times the
// reporter set.
func EventTime(e *corev1.Event) time.Time {
	if !e.LastTimestamp.IsZero() {
		return e.LastTimestamp.Time
	}
	if !e.EventTime.IsZero() {
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}
