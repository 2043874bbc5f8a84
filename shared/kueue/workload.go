package kueue

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// WorkloadGVK is the Workload in the version Kueue v0.17 stores and serves
// first.
var WorkloadGVK = schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "Workload"}

const (
	// QueueLabel puts a job in a LocalQueue.
	QueueLabel = "kueue.x-k8s.io/queue-name"
	// DefaultLocalQueue is the LocalQueue Kueue puts a job without
	// QueueLabel in when its namespace has one of that name (Kueue's
	// LocalQueueDefaulting, GA in v0.17): its webhook sets the label when
	// the job is created, and refuses removing it afterwards.
	DefaultLocalQueue = "default"
	// JobUIDLabel is the label Kueue puts on a Workload with the UID of
	// the job it tracks (Kueue's pkg/controller/constants JobUIDLabel).
	JobUIDLabel = "kueue.x-k8s.io/job-uid"
	// ResourceInUseFinalizer is the finalizer Kueue puts on every
	// Workload it makes (Kueue's ResourceInUseFinalizerName).
	ResourceInUseFinalizer = "kueue.x-k8s.io/resource-in-use"
	// JobOwnerNameAnnotation names the job a Workload tracks (Kueue's
	// pkg/controller/constants).
	JobOwnerNameAnnotation = "kueue.x-k8s.io/job-owner-name"
	// JobOwnerGVKAnnotation is the kind of that job, as
	// schema.GroupVersionKind.String() writes it.
	JobOwnerGVKAnnotation = "kueue.x-k8s.io/job-owner-gvk"
)

// Condition types of a Workload that say where it stands.
const (
	conditionQuotaReserved = "QuotaReserved"
	conditionAdmitted      = "Admitted"
	conditionEvicted       = "Evicted"
	conditionFinished      = "Finished"
)

// NewWorkload is an empty Workload to read into or to watch.
func NewWorkload() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(WorkloadGVK)
	return u
}

// WorkloadsOf lists the Workloads Kueue made for the job with uid in
// namespace ns.
func WorkloadsOf(ctx context.Context, c client.Reader, ns string, uid types.UID) ([]unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(WorkloadGVK.GroupVersion().WithKind(WorkloadGVK.Kind + "List"))
	if err := c.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{JobUIDLabel: string(uid)}); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// State is where a Workload stands, in Kueue's own words.
type State struct {
	// Admitted is true once Kueue admitted the Workload and has not
	// evicted it since.
	Admitted bool
	// Finished is true once Kueue considers the Workload done; it holds
	// no quota.
	Finished bool
	// Reason and Message are Kueue's explanation of a wait: those of an
	// Evicted=True condition (the reason says which eviction, e.g.
	// Preempted), else of QuotaReserved=False. Both are empty when Kueue
	// has not said yet.
	Reason, Message string
}

// Observe reads a Workload's conditions.
func Observe(wl *unstructured.Unstructured) State {
	byType := conditionsOf(wl)
	var st State
	st.Finished = byType[conditionFinished].Status == metav1.ConditionTrue
	evicted := byType[conditionEvicted]
	switch {
	case evicted.Status == metav1.ConditionTrue:
		st.Reason, st.Message = evicted.Reason, evicted.Message
	case byType[conditionAdmitted].Status == metav1.ConditionTrue:
		st.Admitted = true
	case byType[conditionQuotaReserved].Status == metav1.ConditionFalse:
		c := byType[conditionQuotaReserved]
		st.Reason, st.Message = c.Reason, c.Message
	}
	return st
}

// WaitMessage is why Kueue keeps a Workload waiting, in one line: an
// eviction as "reason: message", or the reason quota is not reserved.
func WaitMessage(wl *unstructured.Unstructured) string {
	byType := conditionsOf(wl)
	if c := byType[conditionEvicted]; c.Status == metav1.ConditionTrue {
		return fmt.Sprintf("%s: %s", c.Reason, c.Message)
	}
	if c := byType[conditionQuotaReserved]; c.Status == metav1.ConditionFalse {
		return c.Message
	}
	return ""
}

func conditionsOf(wl *unstructured.Unstructured) map[string]metav1.Condition {
	conds, _, _ := unstructured.NestedSlice(wl.Object, "status", "conditions")
	out := map[string]metav1.Condition{}
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		typ, _ := m["type"].(string)
		status, _ := m["status"].(string)
		reason, _ := m["reason"].(string)
		message, _ := m["message"].(string)
		out[typ] = metav1.Condition{Type: typ, Status: metav1.ConditionStatus(status), Reason: reason, Message: message}
	}
	return out
}
