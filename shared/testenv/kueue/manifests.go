package kueue

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	workload "github.com/ml-platform/ml-platform/shared/kueue"
)

// installCRDs installs the module's CRDs, with the conversion webhook its
// kustomization patches in for the kinds that have one.
func (k *Kueue) installCRDs(admin *rest.Config, moduleDir string) error {
	base := filepath.Join(moduleDir, "config", "components", "crd")
	read := envtest.CRDInstallOptions{Paths: []string{filepath.Join(base, "bases")}, ErrorIfPathMissing: true}
	if err := envtest.ReadCRDFiles(&read); err != nil {
		return err
	}
	crds := read.CRDs
	converted, err := conversionPatchedCRDs(base)
	if err != nil {
		return err
	}
	for _, crd := range crds {
		if !converted[crd.Name] {
			continue
		}
		crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
			Strategy: apiextensionsv1.WebhookConverter,
			Webhook: &apiextensionsv1.WebhookConversion{
				ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: ptr.To(k.url("/convert")), CABundle: k.hooks.LocalServingCAData},
				ConversionReviewVersions: []string{"v1"},
			},
		}
	}
	_, err = envtest.InstallCRDs(admin, envtest.CRDInstallOptions{CRDs: crds, MaxTime: time.Minute})
	return err
}

// conversionPatchedCRDs are the names of the CRDs that Kueue's
// config/components/crd/kustomization.yaml gives a conversion webhook.
func conversionPatchedCRDs(base string) (map[string]bool, error) {
	b, err := os.ReadFile(filepath.Join(base, "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	var kustomization struct {
		Patches []struct {
			Path string `json:"path"`
		} `json:"patches"`
	}
	if err := yaml.Unmarshal(b, &kustomization); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, p := range kustomization.Patches {
		if !strings.Contains(filepath.Base(p.Path), "webhook_in_") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(base, p.Path))
		if err != nil {
			return nil, err
		}
		var patch metav1.PartialObjectMetadata
		if err := yaml.Unmarshal(b, &patch); err != nil {
			return nil, err
		}
		out[patch.Name] = true
	}
	return out, nil
}

func (k *Kueue) url(path string) string {
	return "https://" + k.hooks.LocalServingHost + ":" + strconv.Itoa(k.hooks.LocalServingPort) + path
}

// installWebhooks creates the module's webhook configurations, each
// webhook pointed at the process and given the namespaceSelector that
// Kueue's kustomization patches in (the pod and StatefulSet webhooks skip
// kube-system and kueue-system), and waits until the API server calls
// them.
func (k *Kueue) installWebhooks(ctx context.Context, moduleDir string) error {
	dir := filepath.Join(moduleDir, "config", "components", "webhook")
	selectors, err := webhookNamespaceSelectors(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return err
	}
	b, err := os.ReadFile(filepath.Join(dir, "manifests.yaml"))
	if err != nil {
		return err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var raw map[string]any
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return err
		}
		obj, err := k.webhookConfiguration(raw, selectors)
		if err != nil {
			return err
		}
		if obj == nil {
			continue
		}
		if err := k.c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return k.waitWebhooks(ctx)
}

// webhookNamespaceSelectors reads the namespaceSelector that each patch of
// Kueue's webhook kustomization gives a webhook, by webhook name.
func webhookNamespaceSelectors(path string) (map[string]*metav1.LabelSelector, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var kustomization struct {
		Patches []struct {
			Patch string `json:"patch"`
		} `json:"patches"`
	}
	if err := yaml.Unmarshal(b, &kustomization); err != nil {
		return nil, err
	}
	out := map[string]*metav1.LabelSelector{}
	for _, p := range kustomization.Patches {
		var patch struct {
			Webhooks []struct {
				Name              string                `json:"name"`
				NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector"`
			} `json:"webhooks"`
		}
		if err := yaml.Unmarshal([]byte(p.Patch), &patch); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		for _, w := range patch.Webhooks {
			if w.NamespaceSelector != nil {
				out[w.Name] = w.NamespaceSelector
			}
		}
	}
	return out, nil
}

// webhookConfiguration decodes one manifest and points its webhooks at the
// process.
func (k *Kueue) webhookConfiguration(raw map[string]any, selectors map[string]*metav1.LabelSelector) (client.Object, error) {
	b, err := yaml.Marshal(raw)
	if err != nil {
		return nil, err
	}
	point := func(name string, cc *admissionregistrationv1.WebhookClientConfig) *metav1.LabelSelector {
		if cc.Service != nil && cc.Service.Path != nil {
			cc.URL = ptr.To(k.url(*cc.Service.Path))
			cc.Service = nil
		}
		cc.CABundle = k.hooks.LocalServingCAData
		return selectors[name].DeepCopy()
	}
	switch raw["kind"] {
	case "MutatingWebhookConfiguration":
		obj := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := yaml.Unmarshal(b, obj); err != nil {
			return nil, err
		}
		for i := range obj.Webhooks {
			if sel := point(obj.Webhooks[i].Name, &obj.Webhooks[i].ClientConfig); sel != nil {
				obj.Webhooks[i].NamespaceSelector = sel
			}
		}
		k.hooks.MutatingWebhooks = append(k.hooks.MutatingWebhooks, obj)
		return obj, nil
	case "ValidatingWebhookConfiguration":
		obj := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := yaml.Unmarshal(b, obj); err != nil {
			return nil, err
		}
		for i := range obj.Webhooks {
			if sel := point(obj.Webhooks[i].Name, &obj.Webhooks[i].ClientConfig); sel != nil {
				obj.Webhooks[i].NamespaceSelector = sel
			}
		}
		k.hooks.ValidatingWebhooks = append(k.hooks.ValidatingWebhooks, obj)
		return obj, nil
	}
	return nil, nil
}

// waitWebhooks waits until a dry-run object of a switched-on integration
// comes back mutated by Kueue's webhook; the API server learns of new
// webhook configurations a little after they are created.
func (k *Kueue) waitWebhooks(ctx context.Context) error {
	probe := jobProbe
	if !slices.Contains(k.frameworks, "batch/job") && slices.Contains(k.frameworks, "statefulset") {
		probe = statefulSetProbe
	}
	// A refused call (webhook not reachable yet) is retried; the last one
	// explains a timeout.
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		obj, mutated := probe()
		last = k.c.Create(ctx, obj, client.DryRunAll)
		return last == nil && mutated(), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for Kueue's webhooks: %w (last call: %w)", err, last)
	}
	return nil
}

var probeMeta = metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, GenerateName: "webhook-probe-", Labels: map[string]string{workload.QueueLabel: "probe"}}

var probePod = corev1.PodTemplateSpec{Spec: corev1.PodSpec{
	RestartPolicy: corev1.RestartPolicyNever,
	Containers:    []corev1.Container{{Name: "probe", Image: "probe"}},
}}

// jobProbe is a queued Job created running, which Kueue's Job webhook
// suspends.
func jobProbe() (client.Object, func() bool) {
	job := &batchv1.Job{ObjectMeta: *probeMeta.DeepCopy(), Spec: batchv1.JobSpec{Suspend: ptr.To(false), Template: *probePod.DeepCopy()}}
	return job, func() bool { return ptr.Deref(job.Spec.Suspend, false) }
}

// statefulSetProbe is a queued StatefulSet, whose pod template Kueue's
// StatefulSet webhook marks as suspended by its parent.
func statefulSetProbe() (client.Object, func() bool) {
	tpl := probePod.DeepCopy()
	tpl.Labels = map[string]string{"app": "probe"}
	tpl.Spec.RestartPolicy = corev1.RestartPolicyAlways
	sts := &appsv1.StatefulSet{ObjectMeta: *probeMeta.DeepCopy(), Spec: appsv1.StatefulSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: tpl.Labels}, Template: *tpl,
	}}
	return sts, func() bool { return sts.Spec.Template.Annotations["kueue.x-k8s.io/suspended-by-parent"] != "" }
}
