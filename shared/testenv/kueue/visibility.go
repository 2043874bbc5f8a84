package kueue

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// visibilityService is the Service that Kueue's APIServices name.
const visibilityService = "visibility-server"

// registerVisibility creates the module's APIServices of the visibility
// API and the Service they name, and waits until the aggregator finds the
// API available. The Service is an ExternalName of localhost: without
// --enable-aggregator-routing the aggregator dials an ExternalName
// Service's host on the APIService's port, which is the process's port
// here, while Endpoints may not hold a loopback address. Kueue's manifests
// skip TLS verification (insecureSkipTLSVerify), so the webhook
// certificate serves.
func (k *Kueue) registerVisibility(ctx context.Context, moduleDir string) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: visibilityService},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost"},
	}
	if err := k.c.Create(ctx, svc); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	k.registered = append(k.registered, svc)
	var services []*unstructured.Unstructured
	for _, version := range []string{"v1beta1", "v1beta2"} {
		b, err := os.ReadFile(filepath.Join(moduleDir, "config", "components", "visibility", "apiservice_"+version+".yaml"))
		if err != nil {
			return err
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(b, &obj.Object); err != nil {
			return err
		}
		if err := unstructured.SetNestedField(obj.Object, int64(k.visibilityPort), "spec", "service", "port"); err != nil {
			return err
		}
		if err := k.c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		k.registered = append(k.registered, obj)
		services = append(services, obj)
	}
	for _, obj := range services {
		if err := k.waitAvailable(ctx, obj); err != nil {
			return err
		}
	}
	return nil
}

// waitAvailable waits until the aggregator reports the APIService
// Available, which it does once its discovery call reached Kueue.
func (k *Kueue) waitAvailable(ctx context.Context, obj *unstructured.Unstructured) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := k.c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Available" {
				last = fmt.Sprintf("%v: %v", m["reason"], m["message"])
				return m["status"] == "True", nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for APIService %s to be Available: %w (last: %s)", obj.GetName(), err, last)
	}
	return nil
}
