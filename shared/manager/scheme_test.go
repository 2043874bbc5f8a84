package manager

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

func TestNewScheme(t *testing.T) {
	s, err := NewScheme(clientgoscheme.AddToScheme)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Recognizes(corev1.SchemeGroupVersion.WithKind("Pod")) {
		t.Error("the scheme does not know Pods")
	}
	boom := errors.New("boom")
	_, err = New(DefaultConfig(), Options{Name: "scheme-test", AddToScheme: []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, func(*runtime.Scheme) error { return boom },
	}})
	if !errors.Is(err, boom) {
		t.Errorf("New with a failing AddToScheme: %v, want the failure", err)
	}
}
