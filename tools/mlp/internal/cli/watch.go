package cli

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// watch calls each with every object of kind k that changes after
// resourceVersion, until ctx ends (nil) or the API server refuses the watch.
// It is client-go's RetryWatcher: a watch that resumes from the last
// resourceVersion seen when the API server closes it, so nothing is polled
// and no change is missed or repeated across reconnects.
func (s *session) watch(ctx context.Context, k kind, namespace, selector, resourceVersion string, each func(*unstructured.Unstructured) error) error {
	res := s.dyn.Resource(k.gvr()).Namespace(namespace)
	lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		opts.LabelSelector = selector
		return res.Watch(ctx, opts)
	}}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, resourceVersion, lw)
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

func handleEvent(ev watch.Event, k kind, namespace string, each func(*unstructured.Unstructured) error) error {
	switch ev.Type {
	case watch.Added, watch.Modified, watch.Deleted:
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok {
			return nil
		}
		return each(u)
	case watch.Error:
		err := apierrors.FromObject(ev.Object)
		if ev.Object == nil {
			err = errors.New("the watch ended with an error")
		}
		return explain(err, k, "watch", "", namespace)
	}
	return nil
}
