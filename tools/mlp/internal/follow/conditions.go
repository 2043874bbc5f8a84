package follow

import (
	"context"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/kube"
)

// What a TrainingJob that has not finished is waiting for, in the
// operator's own words. The CLI knows no particular reason: a condition
// the operator adds later (pods refused by Pod Security or a quota) is
// shown as it is written.

// routineFalse are the condition types whose False is the normal state of
// a job that is running or waiting its turn; any other False condition
// says what the job waits for.
var routineFalse = []string{
	trainingv1alpha1.ConditionQueued, trainingv1alpha1.ConditionRestarting, trainingv1alpha1.ConditionFinished,
	commonv1alpha1.ConditionSuspended, commonv1alpha1.ConditionSucceeded, commonv1alpha1.ConditionFailed,
	commonv1alpha1.ConditionStalled, commonv1alpha1.ConditionReconciling, commonv1alpha1.ConditionCleanupFailed,
}

// waitingOrder puts the conditions a job depends on first: a missing
// FeatureStore explains pods that do not run, not the other way round.
var waitingOrder = []string{
	trainingv1alpha1.ConditionFeatureStoresReady, trainingv1alpha1.ConditionCheckpointReady,
	trainingv1alpha1.ConditionCreated, trainingv1alpha1.ConditionRunning,
}

// Finished is true once the job succeeded or failed for good.
func Finished(tj *trainingv1alpha1.TrainingJob) bool {
	return meta.IsStatusConditionTrue(tj.Status.Conditions, commonv1alpha1.ConditionSucceeded) ||
		meta.IsStatusConditionTrue(tj.Status.Conditions, commonv1alpha1.ConditionFailed)
}

// WaitingCondition is the condition that says why an unfinished job does
// not progress: Stalled when True, else the first False condition that is
// not routine, dependencies first; nil when nothing holds the job.
func WaitingCondition(tj *trainingv1alpha1.TrainingJob) *metav1.Condition {
	if Finished(tj) {
		return nil
	}
	if c := meta.FindStatusCondition(tj.Status.Conditions, commonv1alpha1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
		return c
	}
	var found *metav1.Condition
	rank := len(waitingOrder)
	for i := range tj.Status.Conditions {
		c := &tj.Status.Conditions[i]
		if c.Status != metav1.ConditionFalse || slices.Contains(routineFalse, c.Type) {
			continue
		}
		r := slices.Index(waitingOrder, c.Type)
		if r < 0 {
			r = len(waitingOrder)
		}
		if found == nil || r < rank {
			found, rank = c, r
		}
	}
	return found
}

// ConditionText is "Reason: message", or the reason alone.
func ConditionText(c *metav1.Condition) string {
	if c == nil {
		return ""
	}
	if c.Message == "" {
		return c.Reason
	}
	return c.Reason + ": " + c.Message
}

// Pending says whether the job's pods are not all running yet, when the
// operator's and the cluster's warnings are the news.
func Pending(tj *trainingv1alpha1.TrainingJob) bool {
	return !Finished(tj) && !meta.IsStatusConditionTrue(tj.Status.Conditions, trainingv1alpha1.ConditionRunning)
}

// LatestWarning is the newest Warning event of this TrainingJob (by uid,
// not an earlier one of the same name) since its waiting condition began;
// nil when there is none or the user may not read events, which only
// costs the hint.
func LatestWarning(ctx context.Context, s *kube.Session, tj *trainingv1alpha1.TrainingJob) *corev1.Event {
	var events corev1.EventList
	err := s.C.List(ctx, &events, client.InNamespace(s.Namespace), client.MatchingFields{
		"involvedObject.kind": "TrainingJob", "involvedObject.name": tj.Name,
		"involvedObject.uid": string(tj.UID), "type": corev1.EventTypeWarning,
	})
	if err != nil {
		return nil
	}
	since := tj.CreationTimestamp.Time
	if c := WaitingCondition(tj); c != nil {
		since = c.LastTransitionTime.Truncate(time.Second)
	}
	var latest *corev1.Event
	for i := range events.Items {
		e := &events.Items[i]
		if t := kube.EventTime(e); !t.Before(since) && (latest == nil || !t.Before(kube.EventTime(latest))) {
			latest = e
		}
	}
	return latest
}

func warningText(e *corev1.Event) string {
	if e == nil {
		return ""
	}
	return "last warning " + e.Reason + ": " + strings.TrimSpace(e.Message)
}
