package featurestore

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/testenv"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/cmd/util"
	"github.com/ml-platform/ml-platform/tools/mlp/test/clitest"
)

const feastConfig = "project: demo\nonline_store:\n  type: redis\n  connection_string: redis:6379,password=hunter2\n"

// featureStoreWithConfig creates a FeatureStore that published its client
// configuration, as the operator does.
func featureStoreWithConfig(t *testing.T, ns, name string) {
	t.Helper()
	c := clitest.AdminClient(t)
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-client"}, Data: map[string][]byte{"feature_store.yaml": []byte(feastConfig)}}
	if err := c.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	fs := &featuresv1alpha1.FeatureStore{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	fs.Spec.Project = "demo"
	fs.Spec.OnlineStore.Managed = &featuresv1alpha1.ManagedServer{}
	fs.Spec.OfflineStore.Managed = &featuresv1alpha1.ManagedServer{}
	fs.Spec.Registry.Managed = &featuresv1alpha1.ManagedServer{}
	if err := c.Create(ctx, fs); err != nil {
		t.Fatal(err)
	}
	fs.Status.ClientConfig = &commonv1alpha1.FeatureStoreClientConfig{SecretName: secret.Name, Key: "feature_store.yaml"}
	fs.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: "True", Reason: "Reconciled", Message: "ready", LastTransitionTime: metav1.Now()}}
	if err := c.Status().Update(ctx, fs); err != nil {
		t.Fatal(err)
	}
}

// TestFeatureStoreConfigWritesAPrivateFile writes feature_store.yaml with
// mode 0600, prints credentials only with --stdout, and never overwrites a
// file without --force.
func TestFeatureStoreConfigWritesAPrivateFile(t *testing.T) {
	ns := clitest.NewNamespace(t)
	featureStoreWithConfig(t, ns, "shop")
	path := filepath.Join(t.TempDir(), "feature_store.yaml")

	r := clitest.Run(t, ns, "featurestore", "config", "shop", "--file", path)
	if r.Code != 0 || r.Out != "" {
		t.Fatalf("exit %d, stdout %q (must stay empty: it holds credentials), stderr %q", r.Code, r.Out, r.Err)
	}
	if got, mode := clitest.ReadFileMode(t, path); got != feastConfig || mode != 0o600 {
		t.Errorf("file %q mode %o, want the configuration with mode 600", got, mode)
	}
	r = clitest.Run(t, ns, "featurestore", "config", "shop", "--file", path)
	if r.Code != util.ExitFailed || !strings.Contains(r.Err, "exists: use --force") {
		t.Errorf("second write without --force: exit %d, stderr %q", r.Code, r.Err)
	}
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := clitest.Run(t, ns, "featurestore", "config", "shop", "--file", path, "--force"); r.Code != 0 {
		t.Fatalf("--force: exit %d, stderr %q", r.Code, r.Err)
	}
	if got, mode := clitest.ReadFileMode(t, path); got != feastConfig || mode != 0o600 {
		t.Errorf("replaced file %q mode %o, want the configuration with mode 600", got, mode)
	}
	if r := clitest.Run(t, ns, "featurestore", "config", "shop", "--stdout"); r.Code != 0 || r.Out != feastConfig {
		t.Errorf("--stdout: exit %d, out %q", r.Code, r.Out)
	}
	if strings.Contains(clitest.Run(t, ns, "featurestore", "get", "shop", "-o", "yaml").Out, "hunter2") {
		t.Error("featurestore get prints the credentials")
	}
}

func TestFeatureStoreListAndNotPublished(t *testing.T) {
	ns := clitest.NewNamespace(t)
	featureStoreWithConfig(t, ns, "shop")
	fs := &featuresv1alpha1.FeatureStore{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "young"}}
	fs.Spec.Project = "young"
	fs.Spec.OnlineStore.Managed = &featuresv1alpha1.ManagedServer{}
	fs.Spec.OfflineStore.Managed = &featuresv1alpha1.ManagedServer{}
	fs.Spec.Registry.Managed = &featuresv1alpha1.ManagedServer{}
	if err := clitest.AdminClient(t).Create(context.Background(), fs); err != nil {
		t.Fatal(err)
	}
	// The API server computes the tables' ages from its clock.
	for name, args := range map[string][]string{
		"featurestore-list-table": {"featurestore", "list"},
		"featurestore-list-wide":  {"featurestore", "list", "-o", "wide"},
	} {
		r := clitest.Run(t, ns, args...)
		if r.Code != 0 {
			t.Fatalf("%v: exit %d, stderr %q", args, r.Code, r.Err)
		}
		clitest.Golden(t, name, clitest.NormalizeTable(clitest.Normalize(r.Out, ns), "AGE"))
	}
	r := clitest.Run(t, ns, "featurestore", "config", "young", "--file", filepath.Join(t.TempDir(), "x.yaml"))
	if r.Code != util.ExitFailed || !strings.Contains(r.Err, `FeatureStore "young" has not published a client configuration`) {
		t.Errorf("exit %d, stderr %q", r.Code, r.Err)
	}
}

// TestMissingCRDNamesTheOperator removes our FeatureStore CRD (Feast's
// featurestores.feast.dev stays) and expects the CLI to say the operator is
// not installed rather than list Feast's objects or print a Go error.
func TestMissingCRDNamesTheOperator(t *testing.T) {
	ns := clitest.NewNamespace(t)
	c := clitest.AdminClient(t)
	ctx := context.Background()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "charts/featurestore-operator/files/crds/features.mlplatform.dev_featurestores.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(data, crd); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, crd.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { restoreCRD(t, c, crd) })
	testenv.Eventually(t, "the FeatureStore CRD to be gone", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(crd), &apiextensionsv1.CustomResourceDefinition{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	for _, args := range [][]string{{"featurestore", "list"}, {"featurestore", "get", "x"}, {"featurestore", "config", "x", "--stdout"}} {
		r := clitest.Run(t, ns, args...)
		if r.Code != util.ExitFailed || !strings.Contains(r.Err, "error: the FeatureStore operator is not installed in this cluster") {
			t.Errorf("%v: exit %d, stderr %q", args, r.Code, r.Err)
		}
	}
}

func restoreCRD(t *testing.T, c client.Client, crd *apiextensionsv1.CustomResourceDefinition) {
	testenv.Eventually(t, "the FeatureStore CRD to be back and served", func(ctx context.Context) (bool, error) {
		fresh := crd.DeepCopy()
		fresh.ResourceVersion = ""
		if err := c.Create(ctx, fresh); err != nil && !apierrors.IsAlreadyExists(err) {
			return false, nil // The old one may still be terminating.
		}
		var list featuresv1alpha1.FeatureStoreList
		return c.List(ctx, &list) == nil, nil
	})
}

// TestFeatureStoreConfigRefusesSpecialFiles never replaces or writes into a
// FIFO, a socket or a directory, even with --force, and replaces a
// symbolic link itself, leaving its target alone.
func TestFeatureStoreConfigRefusesSpecialFiles(t *testing.T) {
	ns := clitest.NewNamespace(t)
	featureStoreWithConfig(t, ns, "shop")
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{fifo: "is a FIFO", sock: "is a socket", sub: "is a directory"} {
		before, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, force := range []bool{false, true} {
			args := []string{"featurestore", "config", "shop", "--file", path}
			if force {
				args = append(args, "--force")
			}
			r := clitest.Run(t, ns, args...)
			if r.Code != util.ExitFailed || !strings.Contains(r.Err, path+" "+want+", not a regular file") {
				t.Errorf("%v: exit %d, stderr %q, want %q", args, r.Code, r.Err, want)
			}
			after, err := os.Lstat(path)
			if err != nil || after.Mode() != before.Mode() || !os.SameFile(before, after) {
				t.Errorf("%v replaced %s (mode %v -> %v, err %v)", args, path, before.Mode(), after.Mode(), err)
			}
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 3 {
		t.Errorf("the directory holds %d entries (err %v), want the three special files and no temporary file", len(entries), err)
	}

	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if r := clitest.Run(t, ns, "featurestore", "config", "shop", "--file", link, "--force"); r.Code != 0 {
		t.Fatalf("--force over a link: exit %d, stderr %q", r.Code, r.Err)
	}
	if got, mode := clitest.ReadFileMode(t, link); got != feastConfig || mode != 0o600 {
		t.Errorf("the link was not replaced by a private file: %q mode %o", got, mode)
	}
	if got, _ := clitest.ReadFileMode(t, target); got != "kept" {
		t.Errorf("the link's target was written: %q", got)
	}
}
