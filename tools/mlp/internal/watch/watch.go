// Package watch follows changes of objects through the API server's
// watches, resuming after the server closes them, so that waiting commands
// read again only when something changed.
package watch

import (
	"context"
	"errors"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/klog/v2"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/kube"
)

// Objects calls each with every object of kind k that changes after
// resourceVersion, until ctx ends (nil) or the API server refuses the watch.
func Objects(ctx context.Context, s *kube.Session, k kube.Kind, namespace, selector, resourceVersion string, each func(*unstructured.Unstructured) error) error {
	res := s.Dyn.Resource(k.GVR()).Namespace(namespace)
	return retrying(ctx, k, namespace, resourceVersion, func(ctx context.Context, opts metav1.ListOptions) (apiwatch.Interface, error) {
		opts.LabelSelector = selector
		return res.Watch(ctx, opts)
	}, func(obj runtime.Object) error {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			return each(u)
		}
		return nil
	})
}

// Tables calls each with the API server's one-row table of every object of
// kind k that changes after resourceVersion, as kubectl get --watch prints
// them, until ctx ends (nil) or the API server refuses the watch.
func Tables(ctx context.Context, s *kube.Session, k kube.Kind, q kube.TableQuery, resourceVersion string, each func(*metav1.Table) error) error {
	return retrying(ctx, k, q.Namespace, resourceVersion, func(ctx context.Context, opts metav1.ListOptions) (apiwatch.Interface, error) {
		return s.WatchTable(ctx, k, q, opts)
	}, func(obj runtime.Object) error {
		if t, ok := obj.(*metav1.Table); ok {
			return each(t)
		}
		return nil
	})
}

// retrying is client-go's RetryWatcher over watchFn: a watch that resumes
// from the last resourceVersion seen when the API server closes it, so
// nothing is polled and no change is missed or repeated across reconnects.
// A Table's resourceVersion is its object's, so tables resume as objects do.
func retrying(ctx context.Context, k kube.Kind, namespace, resourceVersion string, watchFn cache.WatchFuncWithContext, each func(runtime.Object) error) error {
	lw := &cache.ListWatch{WatchFuncWithContext: watchFn}
	// A refused watch comes back as an error event, said once by the
	// caller; the RetryWatcher's own log would say it again on stderr.
	w, err := watchtools.NewRetryWatcherWithContext(klog.NewContext(ctx, logr.Discard()), resourceVersion, lw)
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return errors.New("the watch ended before it was interrupted")
			}
			if err := handleEvent(ev, k, namespace, each); err != nil {
				return err
			}
		}
	}
}

func handleEvent(ev apiwatch.Event, k kube.Kind, namespace string, each func(runtime.Object) error) error {
	switch ev.Type {
	case apiwatch.Added, apiwatch.Modified, apiwatch.Deleted:
		return each(ev.Object)
	case apiwatch.Error:
		err := apierrors.FromObject(ev.Object)
		if ev.Object == nil {
			err = errors.New("the watch ended with an error")
		}
		return kube.Explain(err, k, "watch", "", namespace)
	}
	return nil
}

// Job reports on the returned channel when the TrainingJob name or
// one of its pods changes (a pending report is not repeated), until ctx
// ends. A follow reads the job again on each report instead of polling.
func Job(ctx context.Context, s *kube.Session, name string, pause time.Duration) <-chan struct{} {
	changed := make(chan struct{}, 1)
	notify := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	// The follow says itself when the API server cannot be reached; the
	// watches' own error logs would repeat it on stderr.
	ctx = klog.NewContext(ctx, logr.Discard())
	byName(ctx, s, kube.TrainingJobKind, name, pause, notify)
	pods := s.CS.CoreV1().Pods(s.Namespace)
	go keepWatching(ctx, pause, notify, selected("", labels.SelectorFromSet(labels.Set{trainingv1alpha1.LabelJobName: name}).String(),
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return pods.List(ctx, o) }, pods.Watch))
	// The latest Warning of a job whose pods are pending is part of what
	// the follow shows.
	events := s.CS.CoreV1().Events(s.Namespace)
	warnings := fields.SelectorFromSet(fields.Set{
		"involvedObject.kind": kube.TrainingJobKind.GVK.Kind, "involvedObject.name": name, "type": corev1.EventTypeWarning,
	}).String()
	go keepWatching(ctx, pause, notify, selected(warnings, "",
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return events.List(ctx, o) }, events.Watch))
	return changed
}

// Object reports on the returned channel when the object of kind k
// named name changes (a pending report is not repeated), until ctx ends.
func Object(ctx context.Context, s *kube.Session, k kube.Kind, name string, pause time.Duration) <-chan struct{} {
	changed := make(chan struct{}, 1)
	byName(klog.NewContext(ctx, logr.Discard()), s, k, name, pause, func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	})
	return changed
}

func byName(ctx context.Context, s *kube.Session, k kube.Kind, name string, pause time.Duration, notify func()) {
	res := s.Dyn.Resource(k.GVR()).Namespace(s.Namespace)
	go keepWatching(ctx, pause, notify, selected(fields.OneTermEqualSelector("metadata.name", name).String(), "",
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return res.List(ctx, o) }, res.Watch))
}

// listWatch lists and watches one selection of objects.
type listWatch struct {
	list  cache.ListWithContextFunc
	watch cache.WatchFuncWithContext
}

// selected is the list and watch of the objects that match the field and
// label selectors.
func selected(field, label string, list cache.ListWithContextFunc, watchFn cache.WatchFuncWithContext) listWatch {
	sel := func(o metav1.ListOptions) metav1.ListOptions {
		o.FieldSelector, o.LabelSelector = field, label
		return o
	}
	return listWatch{
		list: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return list(ctx, sel(o)) },
		watch: func(ctx context.Context, o metav1.ListOptions) (apiwatch.Interface, error) {
			return watchFn(ctx, sel(o))
		},
	}
}

// keepWatching lists for a resourceVersion and watches from it, notifying
// every change, and starts again after pause when the watch ends (an
// expired resourceVersion, an API server that stayed away), until ctx ends.
// A watch the user may not open ends it: the follow's own reads say so, or
// A user who may read but not watch is served by polling every pause.
func keepWatching(ctx context.Context, pause time.Duration, notify func(), lw listWatch) {
	forbidden := false
	for ctx.Err() == nil {
		if !forbidden {
			forbidden = watchOnce(ctx, notify, lw)
		}
		if Sleep(ctx, pause) != nil {
			return
		}
		if forbidden {
			notify()
		}
	}
}

func watchOnce(ctx context.Context, notify func(), lw listWatch) (forbidden bool) {
	l, err := lw.list(ctx, metav1.ListOptions{})
	if err != nil {
		return apierrors.IsForbidden(err)
	}
	acc, err := meta.ListAccessor(l)
	if err != nil {
		return false
	}
	// What changed between the previous watch and this list is only seen
	// by reading again.
	notify()
	w, err := watchtools.NewRetryWatcherWithContext(ctx, acc.GetResourceVersion(), &cache.ListWatch{WatchFuncWithContext: lw.watch})
	if err != nil {
		return false
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		if ev.Type == apiwatch.Error {
			return apierrors.IsForbidden(apierrors.FromObject(ev.Object))
		}
		notify()
	}
	return false
}

// Sleep waits for d, or less when ctx ends first (its error).
func Sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
