package sample

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	samplev1alpha1 "github.com/ml-platform/ml-platform/shared/internal/sample/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/manager"
	"github.com/ml-platform/ml-platform/shared/testenv"
	"github.com/ml-platform/ml-platform/shared/testenv/operatortest"
)

var (
	env    *testenv.Env
	scheme = runtime.NewScheme()
)

func TestMain(m *testing.M) {
	_ = clientgoscheme.AddToScheme(scheme)
	_ = samplev1alpha1.AddToScheme(scheme)
	testenv.Main(m, testenv.Options{
		CRDDirectoryPaths: []string{"crd"},
		ControllerManager: true,
	}, &env)
}

// operator is a running manager with the Widget reconciler, talking to the
// test API server through a write counter.
type operator struct {
	*operatortest.Operator
	reconciler *Reconciler
}

func startOperator(t *testing.T, ext *External, tune func(*Reconciler)) *operator {
	t.Helper()
	op := &operator{}
	op.Operator, op.reconciler = operatortest.StartController(t, operatortest.Options{
		RESTConfig: env.Config,
		Manager:    manager.Options{Name: "sample-operator", Scheme: scheme},
	}, operatortest.Controller[*Reconciler]{
		Build: func(mgr ctrl.Manager, _ manager.Config) (*Reconciler, error) { return NewReconciler(mgr, ext) },
		Tune:  tune,
	})
	return op
}

// applyManifests creates every object of a multi-document YAML file.
func applyManifests(ctx context.Context, c client.Client, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := c.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
}
