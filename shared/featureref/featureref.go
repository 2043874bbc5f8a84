package featureref

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
)

// GVK of FeatureStore. It is read as unstructured so that operators work
// whether or not the FeatureStore CRD is installed.
var GVK = schema.GroupVersionKind{Group: "features.mlplatform.dev", Version: "v1alpha1", Kind: "FeatureStore"}

// Store is a referenced FeatureStore that published its client
// configuration and is Ready.
type Store struct {
	Name       string
	SecretName string
	Key        string
}

// Resolution is what became of each reference.
type Resolution struct {
	Ready    []Store
	Missing  []string // no such FeatureStore (or the CRD is not installed)
	NotReady []string // exists, but not Ready or no client configuration yet
}

// AllReady reports whether every reference resolved to a Ready store.
func (r Resolution) AllReady() bool { return len(r.Missing) == 0 && len(r.NotReady) == 0 }

// Reason is a condition reason for the worst outcome.
func (r Resolution) Reason() string {
	switch {
	case len(r.Missing) > 0:
		return commonv1alpha1.ReasonDependencyNotFound
	case len(r.NotReady) > 0:
		return commonv1alpha1.ReasonDependencyNotReady
	default:
		return commonv1alpha1.ReasonReconciled
	}
}

// Message explains the resolution to a person.
func (r Resolution) Message() string {
	var parts []string
	if len(r.Missing) > 0 {
		parts = append(parts, fmt.Sprintf("FeatureStore %s not found in this namespace", strings.Join(r.Missing, ", ")))
	}
	if len(r.NotReady) > 0 {
		parts = append(parts, fmt.Sprintf("FeatureStore %s not Ready yet", strings.Join(r.NotReady, ", ")))
	}
	if len(parts) == 0 {
		return "Every referenced FeatureStore is Ready"
	}
	return strings.Join(parts, "; ")
}

// Resolve reads each referenced FeatureStore in namespace. A missing CRD
// makes every reference Missing rather than failing the reconcile.
func Resolve(ctx context.Context, r client.Reader, namespace string, refs []commonv1alpha1.FeatureStoreReference) (Resolution, error) {
	var res Resolution
	for _, ref := range refs {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(GVK)
		err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, u)
		switch {
		case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
			res.Missing = append(res.Missing, ref.Name)
			continue
		case err != nil:
			return res, fmt.Errorf("reading FeatureStore %s: %w", ref.Name, err)
		}
		store, ok := readyStore(u)
		if !ok {
			res.NotReady = append(res.NotReady, ref.Name)
			continue
		}
		res.Ready = append(res.Ready, store)
	}
	return res, nil
}

func readyStore(u *unstructured.Unstructured) (Store, bool) {
	secret, _, _ := unstructured.NestedString(u.Object, "status", "clientConfig", "secretName")
	key, _, _ := unstructured.NestedString(u.Object, "status", "clientConfig", "key")
	if secret == "" || key == "" {
		return Store{}, false
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == commonv1alpha1.ConditionReady && m["status"] == string(metav1.ConditionTrue) {
			observed, _, _ := unstructured.NestedInt64(m, "observedGeneration")
			if observed == u.GetGeneration() {
				return Store{Name: u.GetName(), SecretName: secret, Key: key}, true
			}
		}
	}
	return Store{}, false
}

// VolumeName is the pod volume holding a store's configuration. Names are
// DNS labels of at most 63 characters; long store names are shortened with a
// hash so that two stores never share a volume.
func VolumeName(store string) string {
	name := "featurestore-" + store
	if len(name) <= 63 && !strings.Contains(name, ".") {
		return name
	}
	sum := sha256.Sum256([]byte(store))
	short := strings.ReplaceAll(store, ".", "-")
	if len(short) > 40 {
		short = short[:40]
	}
	return "featurestore-" + strings.TrimSuffix(short, "-") + "-" + hex.EncodeToString(sum[:])[:8]
}

// MountPath is where a store's configuration folder is mounted.
func MountPath(store string) string {
	return path.Join(commonv1alpha1.FeatureStoreMountRoot, store)
}

// Mount adds each store's Secret as a read-only volume to pod, mounts it
// into the given containers, and sets the Feast environment variables. The
// volume projects the published key and is never mounted with subPath, so a
// rotated credential reaches running pods without a restart. Mount is deterministic: the same
// stores give the same pod spec, so an unchanged object never restarts pods.
func Mount(pod *corev1.PodSpec, containerNames []string, stores []Store) {
	if len(stores) == 0 {
		return
	}
	for _, s := range stores {
		pod.Volumes = append(pod.Volumes, corev1.Volume{
			Name: VolumeName(s.Name),
			VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName:  s.SecretName,
				Items:       []corev1.KeyToPath{{Key: s.Key, Path: commonv1alpha1.FeatureStoreConfigKey}},
				DefaultMode: ptr.To[int32](0o440),
			}},
		})
	}
	env := []corev1.EnvVar{
		{Name: commonv1alpha1.FeatureStoreEnvVar, Value: path.Join(MountPath(stores[0].Name), commonv1alpha1.FeatureStoreConfigKey)},
		{Name: commonv1alpha1.FeatureStoreDirEnvVar, Value: commonv1alpha1.FeatureStoreMountRoot},
	}
	for i := range pod.Containers {
		c := &pod.Containers[i]
		if !slices.Contains(containerNames, c.Name) {
			continue
		}
		for _, s := range stores {
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: VolumeName(s.Name), MountPath: MountPath(s.Name), ReadOnly: true})
		}
		for _, e := range env {
			if !slices.ContainsFunc(c.Env, func(have corev1.EnvVar) bool { return have.Name == e.Name }) {
				c.Env = append(c.Env, e)
			}
		}
	}
}

// IndexKey indexes referrers by the FeatureStores they reference, so a
// FeatureStore event maps to its referrers with one cache lookup.
const IndexKey = "mlplatform.featureStores"

// IndexValues extracts the referenced names, for client.FieldIndexer.
func IndexValues(refs []commonv1alpha1.FeatureStoreReference) []string {
	out := make([]string, 0, len(refs))
	for _, r := range refs {
		out = append(out, r.Name)
	}
	return out
}
