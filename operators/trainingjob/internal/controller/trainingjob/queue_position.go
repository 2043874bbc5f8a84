package trainingjob

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/ml-platform/ml-platform/shared/kueue"
)

// A queued job's place in its LocalQueue comes from Kueue's visibility
// API, read through shared/kueue's Positions: one list per LocalQueue per
// refresh, whatever the number of jobs waiting in it.

// +kubebuilder:rbac:groups=visibility.kueue.x-k8s.io,resources=localqueues/pendingworkloads,verbs=get

// DefaultQueuePositionRefresh is how often a queued job's position is
// refreshed by default.
const DefaultQueuePositionRefresh = kueue.DefaultPositionRefresh

// observePosition looks up the position of the Workload named workload in
// the job's LocalQueue, and asks to look again after a refresh period:
// only queued jobs come here.
func (r *Reconciler) observePosition(ctx context.Context, s *scope, workload string) time.Duration {
	if r.positions == nil {
		return 0
	}
	name, _ := s.localQueue()
	queue := types.NamespacedName{Namespace: s.tj.Namespace, Name: name}
	s.queue.position, s.queue.unknown = r.positions.Lookup(ctx, queue, workload)
	return kueue.PositionRefresh(r.QueuePositionRefresh)
}
