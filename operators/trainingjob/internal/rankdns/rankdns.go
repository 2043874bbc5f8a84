// Package rankdns publishes the host names of a native run's ranks
// (<job>-<index>.<Service>) in EndpointSlices that the operator writes
// itself, for one headless Service per namespace that has no selector and
// that every run of the namespace shares.
//
// With a selector, kube-controller-manager's endpoint controllers keep an
// Endpoints object and an EndpointSlice per run and rewrite both at every
// change of any rank's pod: about 16 writes for a run of 4 pods (issue 25;
// bench/backends/README.md). A rank's pod of an Indexed Job with
// restartPolicy Never and backoffLimit 0 gets its address once and keeps
// it until it ends, so the names change only when a rank gets its address
// and when ranks end. No rank of a run gets anywhere before all of them
// have started (rank 0 waits for every other at its rendezvous), so the
// operator writes a run's slice once every rank has an address, or a
// second after the first rank it does not show got its address, whichever
// comes first; it deletes the slice once no rank runs. A healthy run costs
// two writes. No legacy Endpoints object exists at all; cluster DNS
// (CoreDNS) reads EndpointSlices.
//
// The Service is the namespace's, not a run's: a run's ranks are its
// subdomain, and the run's Job name, unique in the namespace, makes their
// host names unique. It is created for the first run of several pods in
// the namespace, owned by nobody (it has no selector, no ports and no
// address), and deleted once no Job of the namespace has its ranks there
// any more: when the last TrainingJob with such a run is deleted. A
// Service per run cost a create and the controllers' work on it for every
// run.
// Each run's slices are its own: named as its Job and owned by it, they
// go with it. Runs started by an earlier version, whose ranks are the
// subdomain of a Service of their own (named as their Job), keep it.
//
// Only pods that the run's Job controls are published, under the host
// name the Job controller gave them: a pod that merely carries the run's
// labels names nobody.
package rankdns

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/apply"
	"github.com/ml-platform/ml-platform/shared/manager"
)

// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;delete

// Name is the controller's name.
const Name = "rankdns"

// Service is the name of the namespace's headless Service whose subdomain
// the ranks of every native run of several pods share.
const Service = "trainingjob-ranks"

// ReasonNotPublished is the warning, on the run's Job and its TrainingJob,
// that the ranks' host names could not be written.
const ReasonNotPublished = "RankNamesNotPublished"

// ManagedBy is the value of the slices' endpointslice.kubernetes.io/managed-by
// label: kube-controller-manager's controllers leave slices of other
// managers alone.
const ManagedBy = "trainingjob-operator.mlplatform.dev"

// MaxEndpoints is the most endpoints one EndpointSlice may hold (the API's
// limit). A run of more ranks (workers go up to 1 024) gets a slice per
// thousand completion indexes, so a rank stays in one slice for its life.
const MaxEndpoints = 1000

// Published tells whether the operator publishes the ranks of svc: a
// headless Service of the operator's with no selector. A run's Service
// created by an earlier version still has a selector; the endpoint
// controllers serve it, and the operator leaves it to them.
func Published(svc *corev1.Service, operatorName string) bool {
	return svc.Spec.Selector == nil && svc.Spec.ClusterIP == corev1.ClusterIPNone &&
		svc.Labels[commonv1alpha1.LabelManagedBy] == operatorName
}

// NewService is the namespace's headless Service for the ranks.
func NewService(namespace, operatorName string) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: Service, Labels: manager.ManagedByLabels(operatorName)},
		Spec:       corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone},
	}
}

// Reconciler converges the EndpointSlices of one run, keyed by its Job.
type Reconciler struct {
	// Client reads through the operator's caches (Jobs, Services, pods and
	// slices carry its managed-by label) and writes.
	Client client.Client
	// APIReader reads an object that a create found existing but the
	// cache does not hold: the operator's own, or somebody else's.
	APIReader    client.Reader
	Recorder     record.EventRecorder
	OperatorName string
	// Period paces the writes of one run's slices (DefaultPeriod when
	// zero; see pacer).
	Period time.Duration
	// Clock is the pacer's clock; nil is the real one.
	Clock clock.PassiveClock

	pace *pacer
}

// jobField indexes the cached pods that have a subdomain by the Job that
// controls them: a run's ranks are found without reading the namespace's
// other pods, and pods without one (every run of one pod) cost the index
// nothing.
const jobField = "rankdns.job"

// ownerField indexes the cached slices the operator manages by the name
// of their controller: the run's Job, or the Service of the run's name
// that an earlier version made.
const ownerField = "rankdns.owner"

// DefaultPeriod is the least time between two writes of one run's slices,
// and the longest a rank with an address waits for the run's other ranks
// to be published with it: far less than a training process takes to
// start.
const DefaultPeriod = time.Second

// foreignRecheck is how often a run whose Service name somebody else's
// Service holds looks again: the operator's cache does not hold that
// Service, so its removal wakes nothing.
const foreignRecheck = 2 * time.Minute

// SetupWithManager registers the controller. Pod changes that do not change
// what a rank publishes (its address, host name, node, whether it still
// runs) wake nothing.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	r.pace = newPacer(cmp.Or[clock.PassiveClock](r.Clock, clock.RealClock{}))
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.Pod{}, jobField, func(o client.Object) []string {
		if pod, ok := o.(*corev1.Pod); ok && pod.Spec.Subdomain != "" {
			if job := jobOf(pod); job != "" {
				return []string{job}
			}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &discoveryv1.EndpointSlice{}, ownerField, func(o client.Object) []string {
		if ref := metav1.GetControllerOf(o); ref != nil && o.GetLabels()[discoveryv1.LabelManagedBy] == ManagedBy {
			return []string{ref.Name}
		}
		return nil
	}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		// A run's Job: its creation (or its arrival in the cache after
		// its ranks' pods) and its deletion.
		For(&batchv1.Job{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			job, ok := o.(*batchv1.Job)
			return ok && job.Spec.Template.Spec.Subdomain != "" && job.Labels[trainingv1alpha1.LabelJobName] != ""
		}), predicate.Funcs{UpdateFunc: func(ctrlevent.UpdateEvent) bool { return false }})).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(podToRun), builder.WithPredicates(rankChanged())).
		// The Service's creation and deletion wake the runs it serves: a
		// deleted one is made again.
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(r.serviceToRuns), builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e ctrlevent.UpdateEvent) bool {
				before, ok1 := e.ObjectOld.(*corev1.Service)
				after, ok2 := e.ObjectNew.(*corev1.Service)
				return ok1 && ok2 && Published(before, r.OperatorName) != Published(after, r.OperatorName)
			},
			GenericFunc: func(ctrlevent.GenericEvent) bool { return false },
		})).
		// A slice somebody changed or deleted is made what it must be again
		// (the operator's own writes come back as a reconcile that finds
		// nothing to do); its creation is the operator's own.
		Watches(&discoveryv1.EndpointSlice{}, handler.EnqueueRequestsFromMapFunc(sliceToRun), builder.WithPredicates(predicate.Funcs{
			CreateFunc:  func(ctrlevent.CreateEvent) bool { return false },
			GenericFunc: func(ctrlevent.GenericEvent) bool { return false },
		})).
		WithOptions(opts).
		Named(Name).
		Complete(r)
}

// jobOf is the name of the Job that controls a pod, or "".
func jobOf(pod *corev1.Pod) string {
	if ref := metav1.GetControllerOf(pod); ref != nil && ref.Kind == "Job" && ref.APIVersion == batchv1.SchemeGroupVersion.String() {
		return ref.Name
	}
	return ""
}

// podToRun maps a rank's pod to its run's Job.
func podToRun(_ context.Context, o client.Object) []reconcile.Request {
	pod, ok := o.(*corev1.Pod)
	if !ok || pod.Spec.Subdomain == "" || pod.Labels[trainingv1alpha1.LabelJobName] == "" {
		return nil
	}
	if job := jobOf(pod); job != "" {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: pod.Namespace, Name: job}}}
	}
	return nil
}

// sliceToRun maps a slice to its run's Job, which bears the name of the
// slice's controller (the Job, or the run's own Service of an earlier
// version).
func sliceToRun(_ context.Context, o client.Object) []reconcile.Request {
	ref := metav1.GetControllerOf(o)
	if ref == nil || o.GetLabels()[discoveryv1.LabelManagedBy] != ManagedBy {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: ref.Name}}}
}

// serviceToRuns maps a Service to the runs whose ranks are its subdomain.
// A Service's creation and deletion are rare; the namespace's Jobs are
// read from the cache. The namespace's Service that no run uses maps to a
// request of its own name, which no run's Job bears: its reconcile finds
// no run and releases the Service. So a Service whose last run went while
// the operator was down goes at its start: the cache's first list brings
// the Service, and no Job's deletion is left to tell.
func (r *Reconciler) serviceToRuns(ctx context.Context, o client.Object) []reconcile.Request {
	runs, err := r.runsOf(ctx, o.GetNamespace(), o.GetName())
	if err == nil && len(runs) == 0 && o.GetName() == Service {
		return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
	}
	return runs
}

// runsOf are the cached Jobs of namespace whose ranks are the subdomain
// service.
func (r *Reconciler) runsOf(ctx context.Context, namespace, service string) ([]reconcile.Request, error) {
	jobs := &batchv1.JobList{}
	if err := r.Client.List(ctx, jobs, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	var out []reconcile.Request
	for i := range jobs.Items {
		if jobs.Items[i].Spec.Template.Spec.Subdomain == service {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&jobs.Items[i])})
		}
	}
	return out, nil
}

// rankChanged passes the events that change what a pod publishes: its
// creation (seen at the operator's start) and deletion when it runs with
// an address, and the updates that change its endpoint. A pod without an
// address publishes nothing, so its scheduling wakes nothing.
func rankChanged() predicate.Funcs {
	published := func(o client.Object) bool {
		p, ok := o.(*corev1.Pod)
		return !ok || rankKey(p) != ""
	}
	return predicate.Funcs{
		CreateFunc: func(e ctrlevent.CreateEvent) bool { return published(e.Object) },
		DeleteFunc: func(e ctrlevent.DeleteEvent) bool { return published(e.Object) },
		UpdateFunc: func(e ctrlevent.UpdateEvent) bool {
			before, ok1 := e.ObjectOld.(*corev1.Pod)
			after, ok2 := e.ObjectNew.(*corev1.Pod)
			return !ok1 || !ok2 || rankKey(before) != rankKey(after)
		},
	}
}

// rankKey is what a pod contributes to its run's slices: "" unless it runs
// with an address.
func rankKey(p *corev1.Pod) string {
	if !running(p) || p.Status.PodIP == "" && len(p.Status.PodIPs) == 0 {
		return ""
	}
	ips := make([]string, 0, len(p.Status.PodIPs)+1)
	ips = append(ips, p.Status.PodIP)
	for _, ip := range p.Status.PodIPs {
		ips = append(ips, ip.IP)
	}
	return fmt.Sprint(ips, p.Spec.Hostname, p.Spec.NodeName)
}

func running(p *corev1.Pod) bool {
	return p.DeletionTimestamp.IsZero() && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// Reconcile writes the slices that Desired returns for a run's Job and
// its pods, when they differ from the cached ones, paced (see Period), and
// creates the namespace's Service when it is missing.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	// A write already waits, and nothing can make it go sooner: its
	// reconcile will read everything afresh.
	if wait := r.pace.scheduled(req.NamespacedName); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	job := &batchv1.Job{}
	if err := r.Client.Get(ctx, req.NamespacedName, job); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		// A deleted Job takes its slices along (they are its own); the
		// namespace's Service goes with the last run that needs it.
		r.forget(req.NamespacedName)
		return ctrl.Result{}, r.release(ctx, req.Namespace)
	}
	subdomain := job.Spec.Template.Spec.Subdomain
	if subdomain == "" || job.Labels[trainingv1alpha1.LabelJobName] == "" || !job.DeletionTimestamp.IsZero() {
		// Not a run (a Job of the Service's name that somebody else
		// made), or one on its way out: the Service stays while any
		// cached Job has its ranks there, this one included.
		r.forget(req.NamespacedName)
		return ctrl.Result{}, r.release(ctx, req.Namespace)
	}
	svc, err := r.service(ctx, job)
	if err != nil || svc == nil {
		r.pace.forget(req.NamespacedName)
		switch {
		case apply.IsForeign(err):
			r.warnOnce(job, err)
			return ctrl.Result{RequeueAfter: foreignRecheck}, nil
		case err != nil && !errors.Is(err, errCacheLags):
			// Refused (a quota on Services, an admission policy): said
			// on each try, which backs off.
			r.warn(job, err)
		}
		return ctrl.Result{}, err
	}
	// Read only: the cache's own objects, not copies.
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(job.Namespace), client.MatchingFields{jobField: job.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, err
	}
	have := &discoveryv1.EndpointSliceList{}
	if err := r.Client.List(ctx, have, client.InNamespace(job.Namespace), client.MatchingFields{ownerField: job.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, err
	}
	want := Desired(svc, job, pods.Items)
	owner := ownerOf(svc, job)
	w := plan(owner, want, have.Items)
	if w.none() {
		r.pace.settled(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	if wait := r.pace.wait(req.NamespacedName, w.adds, complete(want, job), r.period()); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	if err := r.apply(ctx, owner, w); err != nil {
		// A write from a cache that lags the operator's own last write is
		// retried, and says nothing.
		if !apierrors.IsConflict(err) && !errors.Is(err, errCacheLags) {
			r.warn(job, err)
		}
		return ctrl.Result{}, err
	}
	r.pace.wrote(req.NamespacedName, w.keep+len(w.create)+len(w.update) == 0)
	return ctrl.Result{}, nil
}

// service is the Service whose subdomain the run's ranks are, nil when
// the operator does not publish it: a run's own Service of an earlier
// version that is gone or has a selector. The namespace's Service is
// created when missing; a Service of its name that is not the operator's
// headless one without a selector is a ForeignError.
func (r *Reconciler) service(ctx context.Context, job *batchv1.Job) (*corev1.Service, error) {
	key := types.NamespacedName{Namespace: job.Namespace, Name: job.Spec.Template.Spec.Subdomain}
	svc := &corev1.Service{}
	err := r.Client.Get(ctx, key, svc)
	switch {
	case err == nil && !svc.DeletionTimestamp.IsZero():
		// Its deletion wakes the run again.
		return nil, nil
	case err == nil && Published(svc, r.OperatorName):
		return svc, nil
	case key.Name != Service:
		return nil, client.IgnoreNotFound(err)
	case err == nil:
		// The cache holds only the operator's Services: this one was
		// changed since the operator made it.
		return nil, &apply.ForeignError{Kind: "Service", Namespace: key.Namespace, Name: key.Name, Owner: "the " + r.OperatorName + " as a headless Service without a selector",
			Remedy: "let it be deleted: the operator makes it again"}
	case !apierrors.IsNotFound(err):
		return nil, err
	}
	svc = NewService(key.Namespace, r.OperatorName)
	creator := &apply.Applier{Client: r.Client, APIReader: r.APIReader}
	if err := creator.Create(ctx, svc, apply.ManagedBy(r.OperatorName, "rename it: the native backend's ranks need its name in this namespace")); err != nil {
		if apierrors.IsAlreadyExists(err) {
			err = errCacheLags
		}
		return nil, fmt.Errorf("creating the ranks' Service %s: %w", Service, err)
	}
	return svc, nil
}

// release deletes the namespace's Service once no Job of the namespace has
// its ranks there. A Job created meanwhile that the cache does not show
// yet finds the Service gone and makes it again (its deletion wakes the
// namespace's runs too).
func (r *Reconciler) release(ctx context.Context, namespace string) error {
	svc := &corev1.Service{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: Service}, svc); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !Published(svc, r.OperatorName) || !svc.DeletionTimestamp.IsZero() {
		return nil
	}
	if runs, err := r.runsOf(ctx, namespace, Service); err != nil || len(runs) > 0 {
		return err
	}
	// Changed since the cache read it, the delete conflicts and the
	// reconcile is retried.
	return client.IgnoreNotFound(r.Client.Delete(ctx, svc, client.Preconditions{UID: &svc.UID, ResourceVersion: &svc.ResourceVersion}))
}

// ownerOf is the controller of a run's slices: the run's own Service of
// an earlier version (named as the Job), else the Job.
func ownerOf(svc *corev1.Service, job *batchv1.Job) client.Object {
	if svc.Name == job.Name {
		return svc
	}
	return job
}

// warn says on the run's Job and its TrainingJob why the ranks have no
// names: the TrainingJob's status stays Running while the ranks wait for
// each other's names, and its events are where a user looks.
func (r *Reconciler) warn(job *batchv1.Job, err error) {
	for _, obj := range []runtime.Object{job, trainingJobOf(job)} {
		if obj != nil {
			r.Recorder.Eventf(obj, corev1.EventTypeWarning, ReasonNotPublished, "The ranks' host names could not be published: %v", err)
		}
	}
}

// warnOnce warns about a Service name taken once for each run and
// message: looking again every foreignRecheck says nothing new.
func (r *Reconciler) warnOnce(job *batchv1.Job, err error) {
	if r.pace.told(client.ObjectKeyFromObject(job), err.Error()) {
		r.warn(job, err)
	}
}

// forget drops what the pacer keeps of a run that is gone.
func (r *Reconciler) forget(key types.NamespacedName) {
	r.pace.forget(key)
	r.pace.untell(key)
}

// trainingJobOf is the TrainingJob that controls a run's Job, as an
// object an event can name (with its UID, which kubectl describe matches
// events by); nil when the Job is not in the cache or not a TrainingJob's.
func trainingJobOf(job *batchv1.Job) runtime.Object {
	ref := metav1.GetControllerOf(job)
	if ref == nil || ref.Kind != "TrainingJob" || ref.APIVersion != trainingv1alpha1.GroupVersion.String() {
		return nil
	}
	return &trainingv1alpha1.TrainingJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: ref.APIVersion, Kind: ref.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: ref.Name, UID: ref.UID},
	}
}

// complete tells whether want publishes as many ranks as the run's Job
// runs at once: every rank has its name.
func complete(want []discoveryv1.EndpointSlice, job *batchv1.Job) bool {
	n := 0
	for i := range want {
		n += len(want[i].Endpoints)
	}
	return job.UID != "" && n >= int(ptr.Deref(job.Spec.Parallelism, 1))
}

func (r *Reconciler) period() time.Duration {
	if r.Period == 0 {
		return DefaultPeriod
	}
	return r.Period
}

// writes are what it takes to turn a run's slices into the wanted ones.
type writes struct {
	create, update, delete []discoveryv1.EndpointSlice
	// keep are the wanted slices that need no write.
	keep int
	// adds tells whether a write publishes a rank or an address that no
	// slice shows yet, rather than only taking ranks away.
	adds bool
}

func (w writes) none() bool { return len(w.create)+len(w.update)+len(w.delete) == 0 }

// plan compares the wanted slices with the run's cached ones, which owner
// controls. Slices of another owner are not the run's: a create of such a
// name fails, and says so.
func plan(owner metav1.Object, want, have []discoveryv1.EndpointSlice) writes {
	var w writes
	byName := map[string]*discoveryv1.EndpointSlice{}
	for i := range have {
		if metav1.IsControlledBy(&have[i], owner) {
			byName[have[i].Name] = &have[i]
		}
	}
	for _, s := range want {
		cur, ok := byName[s.Name]
		delete(byName, s.Name)
		switch {
		case !ok:
			w.create, w.adds = append(w.create, s), true
		case !same(cur, &s):
			s.ResourceVersion = cur.ResourceVersion
			w.update = append(w.update, s)
			w.adds = w.adds || adds(cur, &s)
		default:
			w.keep++
		}
	}
	for _, stale := range byName {
		w.delete = append(w.delete, *stale)
	}
	return w
}

// adds tells whether want names a host or an address that cur does not.
func adds(cur, want *discoveryv1.EndpointSlice) bool {
	shown := map[string]bool{}
	for _, e := range cur.Endpoints {
		shown[endpointKey(e)] = true
	}
	for _, e := range want.Endpoints {
		if !shown[endpointKey(e)] {
			return true
		}
	}
	return false
}

func endpointKey(e discoveryv1.Endpoint) string {
	return fmt.Sprint(ptr.Deref(e.Hostname, ""), e.Addresses)
}

// apply makes the writes of the slices that controller controls.
func (r *Reconciler) apply(ctx context.Context, controller client.Object, w writes) error {
	// A slice of the name that is somebody else's is a ForeignError, never
	// overwritten; the operator's own that the cache does not show yet
	// (written by the last reconcile) is retried.
	creator := &apply.Applier{Client: r.Client, APIReader: r.APIReader}
	owner := apply.ControlledBy(controller, "run")
	// The run is the operator's: the name to change is the job's.
	owner.Name, owner.Remedy = "the run "+controller.GetName(), "give the TrainingJob another name"

	for i := range w.create {
		s := &w.create[i]
		if err := creator.Create(ctx, s, owner); err != nil {
			if apierrors.IsAlreadyExists(err) {
				err = errCacheLags
			}
			return fmt.Errorf("creating EndpointSlice %s: %w", s.Name, err)
		}
	}
	for i := range w.update {
		if err := r.Client.Update(ctx, &w.update[i]); err != nil {
			return fmt.Errorf("updating EndpointSlice %s: %w", w.update[i].Name, err)
		}
	}
	for i := range w.delete {
		s := &w.delete[i]
		if err := r.Client.Delete(ctx, s, client.Preconditions{UID: &s.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting EndpointSlice %s: %w", s.Name, err)
		}
	}
	return nil
}

// pacer spaces the writes of each run's slices: ranks that get their
// addresses together, or end together, are one write. A write that
// publishes every rank of the run goes out at once when the run's last
// write is at least a period old, else when it is. A write that publishes
// only some of them, or only takes ranks away, waits a period from when
// it was first seen: the run's other ranks get their addresses, or end,
// within moments. It remembers only the runs with a write in the last
// period or one pending, and the warnings told about runs that still
// exist.
type pacer struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	last  map[types.NamespacedName]time.Time
	since map[types.NamespacedName]time.Time
	// at is when a write that had to wait is due.
	at map[types.NamespacedName]time.Time
	// said is the last warning told about a run.
	said map[types.NamespacedName]string
}

func newPacer(c clock.PassiveClock) *pacer {
	return &pacer{
		clock: c, last: map[types.NamespacedName]time.Time{}, since: map[types.NamespacedName]time.Time{},
		at: map[types.NamespacedName]time.Time{}, said: map[types.NamespacedName]string{},
	}
}

// told records that message is told about the run, and says whether it
// was not told last.
func (p *pacer) told(key types.NamespacedName, message string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.said[key] == message {
		return false
	}
	p.said[key] = message
	return true
}

// untell forgets the warnings told about a run that is gone.
func (p *pacer) untell(key types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.said, key)
}

// scheduled is how long until the run's waiting write is due; zero
// when none waits or it is due.
func (p *pacer) scheduled(key types.NamespacedName) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	at, ok := p.at[key]
	if !ok {
		return 0
	}
	if wait := at.Sub(p.clock.Now()); wait > 0 {
		return wait
	}
	delete(p.at, key)
	return 0
}

// wait is how long the run's pending write must still wait; adds says
// it publishes something new, complete that it then shows every rank.
// While it waits for the run's other ranks, a reconcile still reads them:
// the last rank's address sends it at once.
func (p *pacer) wait(key types.NamespacedName, adds, complete bool, period time.Duration) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	var wait time.Duration
	if last, ok := p.last[key]; ok {
		wait = period - now.Sub(last)
	}
	gathering := adds && !complete
	if !adds || gathering {
		since, ok := p.since[key]
		if !ok {
			since = now
			p.since[key] = now
		}
		wait = max(wait, period-now.Sub(since))
	}
	if wait <= 0 {
		return 0
	}
	if !gathering {
		p.at[key] = now.Add(wait)
	}
	return wait
}

// wrote records a write; gone says the run has no slice left, and so
// nothing to pace.
func (p *pacer) wrote(key types.NamespacedName, gone bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.since, key)
	delete(p.at, key)
	if gone {
		delete(p.last, key)
		return
	}
	p.last[key] = p.clock.Now()
}

// settled forgets a pending removal that no longer is one, and a last
// write older than any period.
func (p *pacer) settled(key types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.since, key)
	delete(p.at, key)
	if last, ok := p.last[key]; ok && p.clock.Since(last) > time.Minute {
		delete(p.last, key)
	}
}

func (p *pacer) forget(key types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.since, key)
	delete(p.last, key)
	delete(p.at, key)
}

// errCacheLags is a slice the operator made that its cache does not hold
// yet: the create that found it is retried, and says nothing.
var errCacheLags = errors.New("the cache does not hold the slice yet")

func same(cur, want *discoveryv1.EndpointSlice) bool {
	for k, v := range want.Labels {
		if cur.Labels[k] != v {
			return false
		}
	}
	return cur.AddressType == want.AddressType &&
		equality.Semantic.DeepEqual(cur.Endpoints, want.Endpoints) &&
		equality.Semantic.DeepEqual(cur.Ports, want.Ports)
}

// Desired returns the slices that publish the running ranks of a run's
// Job among pods, in svc: one per thousand completion indexes that has a
// rank with an address, none when no rank runs. A rank is a pod that the
// Job controls, with a completion index, the Service as its subdomain, a
// host name and an address of the Service's IP family, that has not ended
// and is not being deleted. The slices bear the Job's name and are
// controlled by the Job, or by the run's own Service of an earlier
// version.
func Desired(svc *corev1.Service, job *batchv1.Job, pods []corev1.Pod) []discoveryv1.EndpointSlice {
	family := corev1.IPv4Protocol
	if len(svc.Spec.IPFamilies) > 0 {
		family = svc.Spec.IPFamilies[0]
	}
	chunks := map[int][]discoveryv1.Endpoint{}
	for i := range pods {
		p := &pods[i]
		index, ok := rankIndex(p, job, svc.Name)
		if !ok || !running(p) {
			continue
		}
		ip := address(p, family)
		if ip == "" {
			continue
		}
		chunk := index / MaxEndpoints
		chunks[chunk] = append(chunks[chunk], discoveryv1.Endpoint{
			Addresses:  []string{ip},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
			Hostname:   ptr.To(p.Spec.Hostname),
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID},
			NodeName:   nonEmpty(p.Spec.NodeName),
		})
	}
	ports := make([]discoveryv1.EndpointPort, 0, len(svc.Spec.Ports))
	for _, sp := range svc.Spec.Ports {
		port := sp.Port
		if n := sp.TargetPort.IntValue(); n > 0 {
			port = int32(n)
		}
		ports = append(ports, discoveryv1.EndpointPort{Name: ptr.To(sp.Name), Port: ptr.To(port), Protocol: ptr.To(cmp.Or(sp.Protocol, corev1.ProtocolTCP))})
	}
	controller := metav1.OwnerReference{APIVersion: batchv1.SchemeGroupVersion.String(), Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true)}
	if svc.Name == job.Name {
		controller = metav1.OwnerReference{APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID, Controller: ptr.To(true)}
	}
	out := make([]discoveryv1.EndpointSlice, 0, len(chunks))
	for _, chunk := range slices.Sorted(maps.Keys(chunks)) {
		eps := chunks[chunk]
		slices.SortFunc(eps, func(a, b discoveryv1.Endpoint) int {
			return cmp.Or(cmp.Compare(*a.Hostname, *b.Hostname), cmp.Compare(a.TargetRef.Name, b.TargetRef.Name))
		})
		name := job.Name
		if chunk > 0 {
			name = fmt.Sprintf("%s-%d", job.Name, chunk)
		}
		labels := map[string]string{discoveryv1.LabelServiceName: svc.Name, discoveryv1.LabelManagedBy: ManagedBy}
		for _, k := range []string{commonv1alpha1.LabelManagedBy, trainingv1alpha1.LabelJobName, trainingv1alpha1.LabelRun} {
			labels[k] = job.Labels[k]
		}
		out = append(out, discoveryv1.EndpointSlice{
			TypeMeta: metav1.TypeMeta{APIVersion: discoveryv1.SchemeGroupVersion.String(), Kind: "EndpointSlice"},
			ObjectMeta: metav1.ObjectMeta{
				Namespace: job.Namespace, Name: name, Labels: labels,
				OwnerReferences: []metav1.OwnerReference{controller},
			},
			AddressType: discoveryv1.AddressType(family),
			Endpoints:   eps,
			Ports:       ports,
		})
	}
	return out
}

// rankIndex is the completion index of a rank of job, whose ranks are the
// subdomain service, and whether p is one.
func rankIndex(p *corev1.Pod, job *batchv1.Job, service string) (int, bool) {
	owner := metav1.GetControllerOf(p)
	if job.UID == "" || owner == nil || owner.Kind != "Job" || owner.APIVersion != batchv1.SchemeGroupVersion.String() || owner.Name != job.Name || owner.UID != job.UID {
		return 0, false
	}
	if p.Spec.Subdomain != service || p.Spec.Hostname == "" {
		return 0, false
	}
	index, err := strconv.Atoi(p.Annotations[batchv1.JobCompletionIndexAnnotation])
	if err != nil || index < 0 {
		return 0, false
	}
	return index, true
}

// address is the pod's address of the family, if it has one.
func address(p *corev1.Pod, family corev1.IPFamily) string {
	ips := []string{p.Status.PodIP}
	for _, ip := range p.Status.PodIPs {
		ips = append(ips, ip.IP)
	}
	for _, s := range ips {
		a, err := netip.ParseAddr(s)
		if err != nil {
			continue
		}
		if a.Is4() == (family == corev1.IPv4Protocol) {
			return a.String()
		}
	}
	return ""
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
