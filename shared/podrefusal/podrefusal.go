package podrefusal

import (
	"context"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/ml-platform/ml-platform/shared/manager"
)

// Source selects the refusal events of one controller. Kubernetes' own
// workload controllers (Job, StatefulSet, ReplicaSet) record a refused pod
// as a Warning event with reason FailedCreate on the workload; the Kubeflow
// training-operator records it as FailedCreatePod on its job. An empty Kind
// matches every kind. MessagePrefix, when set, narrows a reason that also
// names other failures to the events whose message starts with it.
type Source struct {
	Kind          string
	Reason        string
	MessagePrefix string
}

// selects reports whether e, an event of the source's kind and reason, is
// a refusal.
func (s Source) selects(e *corev1.Event) bool {
	return strings.HasPrefix(e.Message, s.MessagePrefix)
}

// The refusal events of the controllers the platform's children have.
var (
	// KubernetesController is a Job, StatefulSet or ReplicaSet controller's
	// refusal, on the given kind.
	KubernetesController = func(kind string) Source { return Source{Kind: kind, Reason: "FailedCreate"} }
	// KubeflowTrainingOperator is the training-operator's refusal, on any of
	// its job kinds.
	KubeflowTrainingOperator = Source{Reason: "FailedCreatePod"}
	// KubeflowMPILauncher is the training-operator's refusal of an MPIJob's
	// launcher, which its MPI controller creates itself and reports under
	// the reason it also uses for failed jobs.
	KubeflowMPILauncher = Source{Kind: "MPIJob", Reason: "MPIJobFailed", MessagePrefix: "launcher pod created failed: "}
)

// indexInvolvedUID indexes the events by the UID of the object they are
// about, so that a reconcile finds its own with one cache lookup.
const indexInvolvedUID = "involvedObject.uid"

// Watch is a set of informer caches of refusal events only, one per
// Source. The manager's caches are label-restricted to the operator's
// children, and events carry no labels: a field selector keeps each cache
// to the few events that matter.
type Watch struct {
	caches  []cache.Cache
	sources []Source
}

// New builds a Watch and adds its caches to the manager; namespaces limits
// them to a namespace-scoped install's namespaces, nil means every
// namespace.
func New(ctx context.Context, mgr ctrl.Manager, namespaces map[string]cache.Config, sources ...Source) (*Watch, error) {
	w := &Watch{}
	for _, src := range sources {
		set := fields.Set{"reason": src.Reason}
		if src.Kind != "" {
			set["involvedObject.kind"] = src.Kind
		}
		c, err := cache.New(mgr.GetConfig(), cache.Options{
			DefaultNamespaces: namespaces,
			HTTPClient:        mgr.GetHTTPClient(),
			Scheme:            mgr.GetScheme(),
			Mapper:            mgr.GetRESTMapper(),
			DefaultTransform:  cache.TransformStripManagedFields(),
			ByObject:          map[client.Object]cache.ByObject{&corev1.Event{}: {Field: fields.SelectorFromSet(set)}},
		})
		if err != nil {
			return nil, err
		}
		if err := c.IndexField(ctx, &corev1.Event{}, indexInvolvedUID, func(o client.Object) []string {
			return []string{string(o.(*corev1.Event).InvolvedObject.UID)}
		}); err != nil {
			return nil, err
		}
		// On every replica, so that a warm standby's controllers find it
		// synced.
		if err := manager.AddCache(mgr, c); err != nil {
			return nil, err
		}
		w.caches = append(w.caches, c)
		w.sources = append(w.sources, src)
	}
	return w, nil
}

// Sources are the watches a controller adds to be woken by new refusals;
// toOwner maps an event to the objects to reconcile.
func (w *Watch) Sources(toOwner handler.TypedMapFunc[*corev1.Event, reconcile.Request]) []source.Source {
	out := make([]source.Source, 0, len(w.caches))
	for _, c := range w.caches {
		out = append(out, source.Kind(c, &corev1.Event{}, handler.TypedEnqueueRequestsFromMapFunc(toOwner)))
	}
	return out
}

// List returns the refusal events about the object with the given
// namespace and UID. A nil Watch finds none.
func (w *Watch) List(ctx context.Context, namespace string, uid types.UID) ([]corev1.Event, error) {
	if w == nil {
		return nil, nil
	}
	var out []corev1.Event
	for i, c := range w.caches {
		events := &corev1.EventList{}
		if err := c.List(ctx, events, client.InNamespace(namespace), client.MatchingFields{indexInvolvedUID: string(uid)}); err != nil {
			return nil, err
		}
		for _, e := range events.Items {
			if w.sources[i].selects(&e) {
				out = append(out, e)
			}
		}
	}
	return out, nil
}

// Latest returns the most recent refusal event about the object with the
// given namespace and UID, unless it is older than since: events outlive
// their cause by up to an hour, and one from before the latest pod was
// created, or before an earlier start, says nothing about now.
func (w *Watch) Latest(ctx context.Context, namespace string, uid types.UID, since time.Time) (*corev1.Event, error) {
	events, err := w.List(ctx, namespace, uid)
	if err != nil {
		return nil, err
	}
	var latest *corev1.Event
	for i := range events {
		e := &events[i]
		if Time(e).Before(since) {
			continue
		}
		if latest == nil || Time(e).After(Time(latest)) {
			latest = e
		}
	}
	return latest, nil
}

// Time is when an event was last seen, whichever API recorded it.
func Time(e *corev1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	default:
		return e.CreationTimestamp.Time
	}
}

// ReasonQuotaExceeded names a refusal by a ResourceQuota.
const ReasonQuotaExceeded = "QuotaExceeded"

// Cause names what refused the pod, one CamelCase word: QuotaExceeded for
// a ResourceQuota, else the event's own reason. The message is the API
// server's, as the controller recorded it.
func Cause(e *corev1.Event) (reason, message string) {
	message = strings.TrimSpace(e.Message)
	if strings.Contains(message, "exceeded quota") {
		return ReasonQuotaExceeded, message
	}
	return e.Reason, message
}

// podName matches the name of the refused pod in the API server's message,
// which a controller that generates pod names changes with every attempt.
var podName = regexp.MustCompile(`pods "[^"]*"`)

// SameRefusal reports whether two refusal messages say the same thing but
// for the name of the pod that was refused: a controller retries under a
// new generated name each time, and the owner's status should not change
// with each attempt.
func SameRefusal(a, b string) bool {
	return podName.ReplaceAllString(a, `pods`) == podName.ReplaceAllString(b, `pods`)
}
