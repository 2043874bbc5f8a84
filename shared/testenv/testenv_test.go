package testenv

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var env *Env

func TestMain(m *testing.M) {
	// The test binary doubles as the helper process of the process tests.
	if mode := os.Getenv(helperModeEnv); mode != "" {
		os.Exit(helperProcess(mode))
	}
	Main(m, Options{ControllerManager: true}, &env)
}

func clientset(t *testing.T, cfg *rest.Config) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func clientFor(t *testing.T) client.Client {
	t.Helper()
	c, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func eventually(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 60*time.Second, true, cond)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func TestControllerManagerCollectsGarbageAndDeletesNamespaces(t *testing.T) {
	cs := clientset(t, env.Config)
	ctx := t.Context()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "gc-"}}
	ns, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owner, err := cs.CoreV1().ConfigMaps(ns.Name).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	child := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name:            "child",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}},
	}}
	if _, err := cs.CoreV1().ConfigMaps(ns.Name).Create(ctx, child, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().ConfigMaps(ns.Name).Delete(ctx, owner.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "garbage collector deletes the child", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ConfigMaps(ns.Name).Get(ctx, "child", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})

	if err := cs.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "namespace controller finishes deleting the namespace", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

func TestRestartAPIServerKeepsObjectsAndClients(t *testing.T) {
	cs := clientset(t, env.Config)
	ctx := t.Context()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "survivor-", Namespace: "default"}}
	cm, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := env.RestartAPIServer(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the same client reads the object after the restart", func(ctx context.Context) (bool, error) {
		got, err := cs.CoreV1().ConfigMaps("default").Get(ctx, cm.Name, metav1.GetOptions{})
		return err == nil && got.UID == cm.UID, nil
	})
	// A start while it serves (a test's cleanup after its own restart)
	// must not leave a second kube-apiserver behind the tests.
	if err := env.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	if n := apiServerProcesses(t, env.workDir); n != 1 {
		t.Errorf("%d kube-apiserver processes of this environment run, want 1", n)
	}
}

// apiServerProcesses counts the running kube-apiservers whose command line
// names workDir (their certificate folder is in it).
func apiServerProcesses(t *testing.T, workDir string) int {
	t.Helper()
	cmdlines, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, path := range cmdlines {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // the process ended meanwhile
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 0 && filepath.Base(args[0]) == "kube-apiserver" && strings.Contains(string(b), workDir+"/") {
			n++
		}
	}
	return n
}

func TestWriteCounterCountsWritesOnly(t *testing.T) {
	counter := NewWriteCounter()
	cs := clientset(t, counter.Wrap(env.Config))
	ctx := t.Context()
	cm, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "counted-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps("default").Get(ctx, cm.Name, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().ConfigMaps("default").Delete(ctx, cm.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := counter.Count("create", "configmaps"); got != 1 {
		t.Errorf("create configmaps = %d, want 1; all: %s", got, counter)
	}
	if got := counter.Count("delete", "configmaps"); got != 1 {
		t.Errorf("delete configmaps = %d, want 1; all: %s", got, counter)
	}
	if got := counter.Total(); got != 2 {
		t.Errorf("total writes = %d, want 2 (reads are not writes); all: %s", got, counter)
	}
}

func TestRestartControllerManagerCascadesNewCRDsAtOnce(t *testing.T) {
	ctx := t.Context()
	ext, err := apiextensionsclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gadgets.restart.testenv.mlplatform.dev"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "restart.testenv.mlplatform.dev",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Singular: "gadget", Kind: "Gadget", ListKind: "GadgetList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}},
			}},
		},
	}
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Version: "v1", Resource: "gadgets"}
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the CRD is served", func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(gvr).Namespace("default").List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})
	if err := env.RestartControllerManager(); err != nil {
		t.Fatal(err)
	}

	owner := &unstructured.Unstructured{}
	owner.SetAPIVersion("restart.testenv.mlplatform.dev/v1")
	owner.SetKind("Gadget")
	owner.SetGenerateName("owner-")
	owner, err = dyn.Resource(gvr).Namespace("default").Create(ctx, owner, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cs := clientset(t, env.Config)
	child, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		GenerateName:    "gadget-child-",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: owner.GetAPIVersion(), Kind: "Gadget", Name: owner.GetName(), UID: owner.GetUID()}},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A foreground deletion waits for the garbage collector to see the
	// owner's deletion through its watch on Gadgets, and to remove the child.
	foreground := metav1.DeletePropagationForeground
	if err := dyn.Resource(gvr).Namespace("default").Delete(ctx, owner.GetName(), metav1.DeleteOptions{PropagationPolicy: &foreground}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ConfigMaps("default").Get(ctx, child.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("after the restart, the child of a Gadget was not collected within 15 s of its owner's deletion: %v", err)
	}
	t.Logf("collected %s after its owner's deletion", time.Since(start).Round(time.Millisecond))
}
