package cli

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
)

// kind is one of our resources. Objects are read and written as
// unstructured, always with the full group and version, so that fields added
// to the API after this client was built survive a round trip and the
// same-named resources of Kubeflow (notebooks.kubeflow.org) and Feast
// (featurestores.feast.dev) are never addressed by mistake.
type kind struct {
	GVK      schema.GroupVersionKind
	Resource string
	// Operator names the operator that installs the CRD, for the error
	// printed when it is missing.
	Operator string
	// command is the mlp command group of the kind, for examples.
	command string
}

var (
	trainingJobKind = kind{
		GVK:      trainingv1alpha1.GroupVersion.WithKind("TrainingJob"),
		Resource: "trainingjobs",
		Operator: "TrainingJob operator",
		command:  "train",
	}
	notebookKind = kind{
		GVK:      notebooksv1alpha1.GroupVersion.WithKind("Notebook"),
		Resource: "notebooks",
		Operator: "Notebook operator",
		command:  "notebook",
	}
	featureStoreKind = kind{
		GVK:      featuresv1alpha1.GroupVersion.WithKind("FeatureStore"),
		Resource: "featurestores",
		Operator: "FeatureStore operator",
		command:  "featurestore",
	}
)

func (k kind) gvr() schema.GroupVersionResource { return k.GVK.GroupVersion().WithResource(k.Resource) }

// qualified is the resource with its group, as kubectl names it.
func (k kind) qualified() string { return k.Resource + "." + k.GVK.Group }

func (k kind) empty() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(k.GVK)
	return u
}

func (k kind) emptyList() *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(k.GVK.GroupVersion().WithKind(k.GVK.Kind + "List"))
	return l
}

// session is what a command needs to talk to the cluster.
type session struct {
	c         client.Client
	cs        kubernetes.Interface
	dyn       dynamic.Interface
	cfg       *rest.Config
	namespace string
	// explicitNamespace is true when -n was given.
	explicitNamespace bool
}

func newScheme() *runtime.Scheme {
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

// session reads the kubeconfig and checks, within a bounded time, that the
// cluster answers at all, so that an unreachable cluster is said in one
// line at once instead of as every API call's own timeout.
func (o *Options) session(ctx context.Context) (*session, error) {
	cfg, err := o.ConfigFlags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig: %w", err)
	}
	if err := o.probe(ctx, cfg); err != nil {
		return nil, err
	}
	ns, explicit, err := o.ConfigFlags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, fmt.Errorf("reading the namespace from the kubeconfig: %w", err)
	}
	if o.ConfigFlags.Namespace != nil && *o.ConfigFlags.Namespace != "" {
		explicit = true
	}
	c, err := client.New(cfg, client.Options{Scheme: newScheme()})
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
	return &session{c: c, cs: cs, dyn: dyn, cfg: cfg, namespace: ns, explicitNamespace: explicit}, nil
}

func (s *session) get(ctx context.Context, k kind, name string) (*unstructured.Unstructured, error) {
	u := k.empty()
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: name}, u); err != nil {
		return nil, explain(err, k, "get", name, s.namespace)
	}
	return u, nil
}

func (s *session) list(ctx context.Context, k kind, opts ...client.ListOption) ([]unstructured.Unstructured, error) {
	l, err := s.listIn(ctx, k, s.namespace, opts...)
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// listIn lists in one namespace, or in all with metav1.NamespaceAll.
func (s *session) listIn(ctx context.Context, k kind, namespace string, opts ...client.ListOption) (*unstructured.UnstructuredList, error) {
	l := k.emptyList()
	if err := s.c.List(ctx, l, append([]client.ListOption{client.InNamespace(namespace)}, opts...)...); err != nil {
		return nil, explain(err, k, "list", "", namespace)
	}
	return l, nil
}

// mergePatch sends a JSON merge patch of spec or metadata fields.
func (s *session) mergePatch(ctx context.Context, k kind, name string, patch []byte) (*unstructured.Unstructured, error) {
	u := k.empty()
	u.SetNamespace(s.namespace)
	u.SetName(name)
	if err := s.c.Patch(ctx, u, client.RawPatch("application/merge-patch+json", patch), client.FieldValidation("Strict")); err != nil {
		return nil, explain(err, k, "patch", name, s.namespace)
	}
	return u, nil
}

// typed converts an unstructured object of ours into its Go type. Fields
// this client does not know are ignored here but kept in the unstructured
// object, which is what -o json|yaml prints.
func typed[T any](u *unstructured.Unstructured) (*T, error) {
	var out T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &out); err != nil {
		return nil, fmt.Errorf("reading %s %q: %w", u.GetKind(), u.GetName(), err)
	}
	return &out, nil
}

func clientKey(namespace, name string) client.ObjectKey {
	return client.ObjectKey{Namespace: namespace, Name: name}
}
