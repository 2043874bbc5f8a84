package backend

import (
	"fmt"
	"reflect"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/featureref"
)

// Backend runs the runs of TrainingJobs as one kind of child object. The
// reconciler decides runs, restarts and status from the RunState a backend
// reports; a backend only builds, reads and suspends children.
type Backend interface {
	// Name is the spec.backend value this backend serves.
	Name() trainingv1alpha1.Backend
	// Validate returns an *InvalidSpecError when this backend cannot run
	// tj at all, for what the CRD cannot check (a job that relies on the
	// cluster's default backend).
	Validate(tj *trainingv1alpha1.TrainingJob) error
	// Reference names the child of a run, for status.job.
	Reference(tj *trainingv1alpha1.TrainingJob, run int32) trainingv1alpha1.JobReference
	// Empty returns an empty child object of tj's kind, for reads.
	Empty(tj *trainingv1alpha1.TrainingJob) client.Object
	// Build returns the child of a run, with stores mounted. It is
	// deterministic, so an operator upgrade never restarts a job.
	Build(tj *trainingv1alpha1.TrainingJob, run int32, stores []featureref.Store) (client.Object, error)
	// Observe reads a child into the backend-neutral RunState.
	Observe(child client.Object) RunState
	// SuspendPatch sets the child's suspend flag, the one field of its
	// spec the operator changes after creating it.
	SuspendPatch(suspend bool) client.Patch
	// Owned lists the child kinds, for the label-restricted caches and the
	// watches.
	Owned() []client.Object
}

// Companions is implemented by backends whose children need further
// objects beside them, such as the headless Services of an MPIJob's
// workers on the Kubeflow backend. The reconciler creates them right after
// the child, owned by it, and leaves them to the garbage collector.
type Companions interface {
	Companions(tj *trainingv1alpha1.TrainingJob, run int32) []client.Object
}

// Availability is implemented by backends that depend on something a
// cluster may lack, such as the Kubeflow CRDs, which are installed one
// kind at a time. A job whose child kind is unavailable is Stalled with
// the returned error's message; jobs of the backend's other kinds run.
type Availability interface {
	Available(tj *trainingv1alpha1.TrainingJob) error
	// Served lists the child kinds that can be watched now.
	Served() []client.Object
}

// RunState is what a backend observed about the child of a run.
type RunState struct {
	// SpecSuspended is the child's own suspend flag: the operator's for
	// jobs without a queue, Kueue's for queued jobs.
	SpecSuspended bool
	// Suspended is true when the child reports that it is suspended.
	Suspended *Transition
	// Running is set once the child reports every rank running.
	Running *Transition
	// Restarting is set while the child restarts pods itself (Kubeflow).
	Restarting *Transition
	// Succeeded and Failed are the child's terminal states, with the time
	// the child itself recorded.
	Succeeded *Transition
	Failed    *Transition
	// DeadlineExceeded is true when the child failed because it was
	// active longer than runPolicy.activeDeadlineSeconds: its controller
	// then deletes the running pods itself, which says nothing about the
	// pods or their nodes.
	DeadlineExceeded bool
	// StartTime is when the child started, from its own status.
	StartTime *metav1.Time
	// Roles are the pod counts to record in status; nil records none.
	Roles []trainingv1alpha1.RoleStatus
}

// Finished is true when the child succeeded or failed.
func (s RunState) Finished() bool { return s.Succeeded != nil || s.Failed != nil }

// Transition is a state of the child and when the child entered it.
type Transition struct {
	Reason, Message string
	// Time is from the child's status; zero when the child did not say.
	Time metav1.Time
}

// Registry holds the backends an operator runs, registered explicitly
// (no init() globals) by the controller's NewReconciler, which is given the
// default backend by cmd/main.go.
type Registry struct {
	backends map[trainingv1alpha1.Backend]Backend
	// Default is the backend of jobs that name none.
	Default trainingv1alpha1.Backend
}

// NewRegistry registers backends; def must be one of them.
func NewRegistry(def trainingv1alpha1.Backend, backends ...Backend) (*Registry, error) {
	r := &Registry{backends: map[trainingv1alpha1.Backend]Backend{}, Default: def}
	for _, b := range backends {
		r.backends[b.Name()] = b
	}
	if _, ok := r.backends[def]; !ok {
		return nil, fmt.Errorf("default backend %q is not one of %v", def, r.Names())
	}
	return r, nil
}

// Names lists the registered backends, sorted.
func (r *Registry) Names() []trainingv1alpha1.Backend {
	out := make([]trainingv1alpha1.Backend, 0, len(r.backends))
	for n := range r.backends {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Get returns the backend of a name.
func (r *Registry) Get(name trainingv1alpha1.Backend) (Backend, bool) {
	b, ok := r.backends[name]
	return b, ok
}

// Owned lists the child kinds of every backend that can be watched now.
func (r *Registry) Owned() []client.Object {
	var out []client.Object
	for _, n := range r.Names() {
		b := r.backends[n]
		if a, ok := b.(Availability); ok {
			out = append(out, a.Served()...)
			continue
		}
		out = append(out, b.Owned()...)
	}
	return out
}

// Of is the backend tj runs on: the one recorded in status, else the one
// whose child status.job names, else the one the spec names, else the
// default. The recorded one wins so that a change of the operator's default
// never moves a running job; the child's kind covers jobs an operator
// older than status.backend started (they ran on Kubeflow, and must not
// get a second child on today's default after an upgrade).
func (r *Registry) Of(tj *trainingv1alpha1.TrainingJob) trainingv1alpha1.Backend {
	switch {
	case tj.Status.Backend != "":
		return tj.Status.Backend
	case tj.Status.Job != nil:
		if b := r.childBackend(tj); b != "" {
			return b
		}
	}
	if tj.Spec.Backend != "" {
		return tj.Spec.Backend
	}
	return r.Default
}

// childBackend is the backend whose child of tj's current run has the kind
// status.job records, or "" when none has.
func (r *Registry) childBackend(tj *trainingv1alpha1.TrainingJob) trainingv1alpha1.Backend {
	recorded := tj.Status.Job
	for _, n := range r.Names() {
		b := r.backends[n]
		// A backend names children only for jobs it can run.
		if b.Validate(tj) != nil {
			continue
		}
		ref := b.Reference(tj, tj.Status.Run)
		if ref.APIVersion == recorded.APIVersion && ref.Kind == recorded.Kind {
			return n
		}
	}
	return ""
}

// Observe reads a child of any registered backend, found by its type.
func (r *Registry) Observe(child client.Object) (RunState, bool) {
	for _, n := range r.Names() {
		b := r.backends[n]
		for _, kind := range b.Owned() {
			if reflect.TypeOf(kind) == reflect.TypeOf(child) {
				return b.Observe(child), true
			}
		}
	}
	return RunState{}, false
}
