package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// recordSecrets watches every Secret of the test API server until ctx ends
// and records its values as credentials, so that the log scan knows the
// credentials of Secrets that tests deleted or rotated too.
func recordSecrets(ctx context.Context, cs kubernetes.Interface) {
	lw := cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "secrets", metav1.NamespaceAll, fields.Everything())
	informer := cache.NewSharedIndexInformer(lw, &corev1.Secret{}, 0, cache.Indexers{})
	record := func(obj any) {
		if s, ok := obj.(*corev1.Secret); ok {
			recordSecret(s)
		}
	}
	_, _ = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    record,
		UpdateFunc: func(_, obj any) { record(obj) },
	})
	go informer.RunWithContext(ctx)
}

func recordSecret(s *corev1.Secret) {
	// Helm's release records hold rendered charts, no credentials.
	if s.Type == "helm.sh/release.v1" {
		return
	}
	for key, value := range s.Data {
		if notCredentialKeys[strings.ToLower(key)] {
			continue
		}
		credentials.Add(string(value), fmt.Sprintf("Secret %s/%s key %s", s.Namespace, s.Name, key))
	}
}

// VerifyLogs fails when the captured operator logs (Logs) contain any
// credential of the Secrets this process's test API servers held or that
// tests recorded, in any encoding Credentials.Scan knows. Main runs it after
// the package's tests, whichever ran and in whatever order; a TestMain that
// uses Start runs it after m.Run.
func (e *Env) VerifyLogs() error {
	// The watch may lag behind the last tests' Secrets; a final list
	// catches up.
	if cs, err := kubernetes.NewForConfig(e.Config); err == nil {
		if list, err := cs.CoreV1().Secrets(metav1.NamespaceAll).List(context.Background(), metav1.ListOptions{}); err == nil {
			for i := range list.Items {
				recordSecret(&list.Items[i])
			}
		}
	}
	logs := Logs.String()
	leaks := credentials.Scan(logs)
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "testenv: scanned %d bytes of operator logs for %d credentials: %d found\n", len(logs), credentials.Len(), len(leaks))
	}
	if len(leaks) == 0 {
		return nil
	}
	errs := make([]error, 0, len(leaks))
	for _, l := range leaks {
		errs = append(errs, fmt.Errorf("the operators' logs contain the credential of %s", l))
	}
	return errors.Join(errs...)
}
