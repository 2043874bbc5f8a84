// Package testing builds TrainingJobs for tests in a few fluent calls, so a
// test names only the fields it is about.
package testing

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
)

// TrainingJobWrapper builds a TrainingJob.
type TrainingJobWrapper struct{ trainingv1alpha1.TrainingJob }

// MakeTrainingJob is a PyTorch TrainingJob with a master and workers
// workers, running `python train.py` in a placeholder image.
func MakeTrainingJob(ns, name string, workers int32) *TrainingJobWrapper {
	return &TrainingJobWrapper{trainingv1alpha1.TrainingJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: trainingv1alpha1.TrainingJobSpec{
			Framework: trainingv1alpha1.FrameworkPyTorch,
			Image:     "registry.example.com/mnist:1",
			Command:   []string{"python", "train.py"},
			Workers:   workers,
		},
	}}
}

// Obj returns the TrainingJob built so far.
func (w *TrainingJobWrapper) Obj() *trainingv1alpha1.TrainingJob { return &w.TrainingJob }

// Framework sets the Kubeflow job kind.
func (w *TrainingJobWrapper) Framework(f trainingv1alpha1.Framework) *TrainingJobWrapper {
	w.Spec.Framework = f
	return w
}

// Image sets the training image.
func (w *TrainingJobWrapper) Image(image string) *TrainingJobWrapper {
	w.Spec.Image = image
	return w
}

// Queue sets the Kueue LocalQueue the job waits in.
func (w *TrainingJobWrapper) Queue(name string) *TrainingJobWrapper {
	w.Spec.QueueName = name
	return w
}

// Suspend sets spec.suspend.
func (w *TrainingJobWrapper) Suspend(suspend bool) *TrainingJobWrapper {
	w.Spec.Suspend = suspend
	return w
}

// Label adds a label.
func (w *TrainingJobWrapper) Label(key, value string) *TrainingJobWrapper {
	if w.Labels == nil {
		w.Labels = map[string]string{}
	}
	w.Labels[key] = value
	return w
}
