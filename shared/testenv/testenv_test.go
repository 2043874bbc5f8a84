package testenv

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

var env *Env

func TestMain(m *testing.M) {
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
