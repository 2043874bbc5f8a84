package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// AdminClient talks to the test API server as a cluster administrator, in
// the role of the platform team and the tests themselves, with scheme.
func (e *Env) AdminClient(t testing.TB, scheme *runtime.Scheme) client.Client {
	t.Helper()
	return NewClient(t, e.Config, scheme)
}

// NewClient is a client of cfg (an administrator's, a user's from AddUser)
// with scheme.
func NewClient(t testing.TB, cfg *rest.Config, scheme *runtime.Scheme) client.Client {
	t.Helper()
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// RepoRoot is the repository's root, the nearest directory above the test's
// working directory that holds go.work, so tests find the charts and CRDs
// wherever their package is. It is called from TestMain too, where no test
// can fail: a test binary run outside the repository panics.
func RepoRoot() string {
	dir, err := os.Getwd()
	if err == nil {
		dir, err = repoRootFrom(dir)
	}
	if err != nil {
		panic(fmt.Sprintf("testenv: no go.work above the test's directory: %v", err))
	}
	return dir
}

func repoRootFrom(dir string) (string, error) {
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", os.ErrNotExist
		}
		dir = parent
	}
}

// WaitGone waits until obj no longer exists: its finalizers are released
// and the API server removed it.
func WaitGone(t testing.TB, c client.Client, obj client.Object) {
	t.Helper()
	Eventually(t, obj.GetName()+" is gone", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object))
		return apierrors.IsNotFound(err), nil
	})
}
