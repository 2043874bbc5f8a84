// Package testing builds Notebooks for tests in a few fluent calls, so a
// test names only the fields it is about.
package testing

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
)

// NotebookWrapper builds a Notebook.
type NotebookWrapper struct{ notebooksv1alpha1.Notebook }

// MakeNotebook is a Notebook with every field defaulted by the API server.
func MakeNotebook(ns, name string) *NotebookWrapper {
	return &NotebookWrapper{notebooksv1alpha1.Notebook{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}}
}

// Obj returns the Notebook built so far.
func (w *NotebookWrapper) Obj() *notebooksv1alpha1.Notebook { return &w.Notebook }

// Image sets the Jupyter image.
func (w *NotebookWrapper) Image(image string) *NotebookWrapper {
	w.Spec.Image = image
	return w
}

// Queue sets the Kueue LocalQueue the notebook waits in.
func (w *NotebookWrapper) Queue(name string) *NotebookWrapper {
	w.Spec.QueueName = name
	return w
}

// Label adds a label.
func (w *NotebookWrapper) Label(key, value string) *NotebookWrapper {
	if w.Labels == nil {
		w.Labels = map[string]string{}
	}
	w.Labels[key] = value
	return w
}
