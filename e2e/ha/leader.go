package ha

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
)

// Holder is the pod named by a leader election Lease's holderIdentity
// (controller-runtime writes "<hostname>_<uuid>"; a pod's hostname is its
// name).
func Holder(identity string) string {
	pod, _, _ := strings.Cut(identity, "_")
	return pod
}

// Operator is one operator Deployment and the Lease its replicas elect a
// leader with.
type Operator struct {
	Deployment *appsv1.Deployment
	Lease      string
}

// FindLease returns the name of the Lease in ns whose holder is one of the
// Deployment's pods, or "" when none is held by them (yet).
func FindLease(ctx context.Context, cs kubernetes.Interface, d *appsv1.Deployment) (string, error) {
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return "", err
	}
	pods, err := cs.CoreV1().Pods(d.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return "", err
	}
	mine := map[string]bool{}
	for _, p := range pods.Items {
		mine[p.Name] = true
	}
	leases, err := cs.CoordinationV1().Leases(d.Namespace).List(ctx, metav1.ListOptions{LabelSelector: labels.Everything().String()})
	if err != nil {
		return "", err
	}
	for _, l := range leases.Items {
		if l.Spec.HolderIdentity != nil && mine[Holder(*l.Spec.HolderIdentity)] {
			return l.Name, nil
		}
	}
	return "", nil
}

// Leader returns the pod holding the Lease, with the time of its last
// renewal.
func Leader(ctx context.Context, cs kubernetes.Interface, ns, lease string) (string, time.Time, error) {
	l, err := cs.CoordinationV1().Leases(ns).Get(ctx, lease, metav1.GetOptions{})
	if err != nil {
		return "", time.Time{}, err
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
		return "", time.Time{}, nil
	}
	var renewed time.Time
	if l.Spec.RenewTime != nil {
		renewed = l.Spec.RenewTime.Time
	}
	return Holder(*l.Spec.HolderIdentity), renewed, nil
}

// Handover polls the Lease every interval from start until a pod other than
// old holds it, and returns how long that took. It gives up when ctx ends.
func Handover(ctx context.Context, cs kubernetes.Interface, ns, lease, old string, start time.Time, interval time.Duration) (string, time.Duration, error) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		holder, _, err := Leader(ctx, cs, ns, lease)
		if err == nil && holder != "" && holder != old {
			return holder, time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			return "", 0, fmt.Errorf("lease %s still held by %s after %s (last error: %w)", lease, old, time.Since(start).Round(time.Millisecond), err)
		case <-tick.C:
		}
	}
}
