// Package rankdns publishes the host names of a native run's ranks
// (<job>-<index>.<service>) in EndpointSlices that the operator writes
// itself, for the run's headless Service, which has no selector.
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
)

// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch;create;update;delete

// Name is the controller's name.
const Name = "rankdns"

// ReasonNotPublished is the warning, on the run's Service and its
// TrainingJob, that the ranks' host names could not be written.
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
// created by an earlier version has a selector; the endpoint controllers
// serve it, and the operator leaves it to them.
func Published(svc *corev1.Service, operatorName string) bool {
	return svc.Spec.Selector == nil && svc.Spec.ClusterIP == corev1.ClusterIPNone &&
		svc.Labels[commonv1alpha1.LabelManagedBy] == operatorName && svc.Labels[trainingv1alpha1.LabelJobName] != ""
}

// Reconciler converges the EndpointSlices of one run's Service.
type Reconciler struct {
	// Client reads through the operator's caches (Services, pods and
	// slices carry its managed-by label) and writes.
	Client client.Client
	// APIReader reads a slice that a create found existing but the cache
	// does not hold yet: the operator's own, or somebody else's.
	APIReader    client.Reader
	Recorder     record.EventRecorder
	OperatorName string
	// Period paces the writes of one Service's slices (DefaultPeriod when
	// zero; see pacer).
	Period time.Duration
	// Clock is the pacer's clock; nil is the real one.
	Clock clock.PassiveClock

	pace *pacer
}

// subdomainField indexes the cached pods by subdomain: a run's ranks are
// found without reading the namespace's other pods, and pods without one
// (every run of one pod) cost the index nothing.
const subdomainField = "spec.subdomain"

// serviceField indexes the cached slices the operator manages by their
// Service.
const serviceField = "rankdns.service"

// DefaultPeriod is the least time between two writes of one run's slices,
// and the longest a rank with an address waits for the run's other ranks
// to be published with it: far less than a training process takes to
// start.
const DefaultPeriod = time.Second

// SetupWithManager registers the controller. Pod changes that do not change
// what a rank publishes (its address, host name, node, whether it still
// runs) wake nothing.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	r.pace = newPacer(cmp.Or[clock.PassiveClock](r.Clock, clock.RealClock{}))
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.Pod{}, subdomainField, func(o client.Object) []string {
		if pod, ok := o.(*corev1.Pod); ok && pod.Spec.Subdomain != "" {
			return []string{pod.Spec.Subdomain}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &discoveryv1.EndpointSlice{}, serviceField, func(o client.Object) []string {
		if s, ok := o.(*discoveryv1.EndpointSlice); ok && s.Labels[discoveryv1.LabelManagedBy] == ManagedBy {
			return []string{s.Labels[discoveryv1.LabelServiceName]}
		}
		return nil
	}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&corev1.Service{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			svc, ok := o.(*corev1.Service)
			return ok && Published(svc, r.OperatorName)
		}), predicate.Funcs{UpdateFunc: func(ctrlevent.UpdateEvent) bool { return false }})).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(podToService), builder.WithPredicates(rankChanged())).
		// A Job that reaches the cache after its ranks' pods.
		Watches(&batchv1.Job{}, handler.EnqueueRequestsFromMapFunc(jobToService), builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(e ctrlevent.CreateEvent) bool {
				job, ok := e.Object.(*batchv1.Job)
				return ok && ptr.Deref(job.Spec.Parallelism, 1) > 1
			},
			UpdateFunc:  func(ctrlevent.UpdateEvent) bool { return false },
			DeleteFunc:  func(ctrlevent.DeleteEvent) bool { return false },
			GenericFunc: func(ctrlevent.GenericEvent) bool { return false },
		})).
		// A slice somebody changed or deleted is made what it must be again
		// (the operator's own writes come back as a reconcile that finds
		// nothing to do); its creation is the operator's own.
		Owns(&discoveryv1.EndpointSlice{}, builder.WithPredicates(predicate.Funcs{
			CreateFunc:  func(ctrlevent.CreateEvent) bool { return false },
			GenericFunc: func(ctrlevent.GenericEvent) bool { return false },
		})).
		WithOptions(opts).
		Named(Name).
		Complete(r)
}

// podToService maps a rank's pod to its run's Service, the pod's subdomain.
func podToService(_ context.Context, o client.Object) []reconcile.Request {
	pod, ok := o.(*corev1.Pod)
	if !ok || pod.Spec.Subdomain == "" || pod.Labels[trainingv1alpha1.LabelJobName] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: pod.Namespace, Name: pod.Spec.Subdomain}}}
}

// jobToService maps a run's Job to the Service of the same name.
func jobToService(_ context.Context, o client.Object) []reconcile.Request {
	if o.GetLabels()[trainingv1alpha1.LabelJobName] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
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

// Reconcile writes the slices that Desired returns for the Service and its
// pods, when they differ from the cached ones, paced (see Period).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	// A write already waits, and nothing can make it go sooner: its
	// reconcile will read everything afresh.
	if wait := r.pace.scheduled(req.NamespacedName); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	svc := &corev1.Service{}
	if err := r.Client.Get(ctx, req.NamespacedName, svc); err != nil {
		// A deleted Service takes its slices along (they are its own).
		r.pace.forget(req.NamespacedName)
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !Published(svc, r.OperatorName) || !svc.DeletionTimestamp.IsZero() {
		r.pace.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	// Read only: the cache's own objects, not copies.
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(svc.Namespace), client.MatchingFields{subdomainField: svc.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, err
	}
	// The run's Job bears the Service's name and owns it; only the pods it
	// controls are ranks.
	job := &batchv1.Job{}
	if err := r.Client.Get(ctx, req.NamespacedName, job); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, err
	}
	have := &discoveryv1.EndpointSliceList{}
	if err := r.Client.List(ctx, have, client.InNamespace(svc.Namespace), client.MatchingFields{serviceField: svc.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, err
	}
	want := Desired(svc, job.UID, pods.Items)
	w := plan(svc, want, have.Items)
	if w.none() {
		r.pace.settled(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	if wait := r.pace.wait(req.NamespacedName, w.adds, complete(want, job), r.period()); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	if err := r.apply(ctx, svc, w); err != nil {
		// A write from a cache that lags the operator's own last write is
		// retried, and says nothing.
		if !apierrors.IsConflict(err) && !errors.Is(err, errCacheLags) {
			// On the TrainingJob too: its status stays Running while the
			// ranks wait for each other's names, and its events are where
			// a user looks.
			for _, obj := range []runtime.Object{svc, trainingJobOf(job)} {
				if obj != nil {
					r.Recorder.Eventf(obj, corev1.EventTypeWarning, ReasonNotPublished, "The ranks' host names could not be published: %v", err)
				}
			}
		}
		return ctrl.Result{}, err
	}
	r.pace.wrote(req.NamespacedName, w.keep+len(w.create)+len(w.update) == 0)
	return ctrl.Result{}, nil
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

// writes are what it takes to turn a Service's slices into the wanted ones.
type writes struct {
	create, update, delete []discoveryv1.EndpointSlice
	// keep are the wanted slices that need no write.
	keep int
	// adds tells whether a write publishes a rank or an address that no
	// slice shows yet, rather than only taking ranks away.
	adds bool
}

func (w writes) none() bool { return len(w.create)+len(w.update)+len(w.delete) == 0 }

// plan compares the wanted slices with the Service's cached ones. Slices
// of another owner are not the Service's: a create of such a name fails,
// and says so.
func plan(svc *corev1.Service, want, have []discoveryv1.EndpointSlice) writes {
	var w writes
	byName := map[string]*discoveryv1.EndpointSlice{}
	for i := range have {
		if metav1.IsControlledBy(&have[i], svc) {
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

// apply makes the writes.
func (r *Reconciler) apply(ctx context.Context, svc *corev1.Service, w writes) error {
	// A slice of the name that is somebody else's is a ForeignError, never
	// overwritten; the operator's own that the cache does not show yet
	// (written by the last reconcile) is retried.
	creator := &apply.Applier{Client: r.Client, APIReader: r.APIReader}
	owner := apply.ControlledBy(svc, "Service")
	// The Service is the operator's: the name to change is the job's.
	owner.Name, owner.Remedy = "the Service "+svc.Name, "give the TrainingJob another name"

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

// pacer spaces the writes of each Service's slices: ranks that get their
// addresses together, or end together, are one write. A write that
// publishes every rank of the run goes out at once when the Service's
// last write is at least a period old, else when it is. A write that
// publishes only some of them, or only takes ranks away, waits a period
// from when it was first seen: the run's other ranks get their addresses,
// or end, within moments. It remembers only the Services with a write in
// the last period or one pending.
type pacer struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	last  map[types.NamespacedName]time.Time
	since map[types.NamespacedName]time.Time
	// at is when a write that had to wait is due.
	at map[types.NamespacedName]time.Time
}

func newPacer(c clock.PassiveClock) *pacer {
	return &pacer{
		clock: c, last: map[types.NamespacedName]time.Time{}, since: map[types.NamespacedName]time.Time{},
		at: map[types.NamespacedName]time.Time{},
	}
}

// scheduled is how long until the Service's waiting write is due; zero
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

// wait is how long the Service's pending write must still wait; adds says
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

// wrote records a write; gone says the Service has no slice left, and so
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

// Desired returns the slices that publish svc's running ranks among pods:
// one per thousand completion indexes that has a rank with an address,
// none when no rank runs. A rank is a pod that the run's Job (named as the
// Service, with UID job) controls, with a completion index, the Service as
// its subdomain, a host name and an address of the Service's IP family,
// that has not ended and is not being deleted. No Job, no ranks.
func Desired(svc *corev1.Service, job types.UID, pods []corev1.Pod) []discoveryv1.EndpointSlice {
	family := corev1.IPv4Protocol
	if len(svc.Spec.IPFamilies) > 0 {
		family = svc.Spec.IPFamilies[0]
	}
	chunks := map[int][]discoveryv1.Endpoint{}
	for i := range pods {
		p := &pods[i]
		index, ok := rankIndex(p, svc.Name, job)
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
	out := make([]discoveryv1.EndpointSlice, 0, len(chunks))
	for _, chunk := range slices.Sorted(maps.Keys(chunks)) {
		eps := chunks[chunk]
		slices.SortFunc(eps, func(a, b discoveryv1.Endpoint) int {
			return cmp.Or(cmp.Compare(*a.Hostname, *b.Hostname), cmp.Compare(a.TargetRef.Name, b.TargetRef.Name))
		})
		name := svc.Name
		if chunk > 0 {
			name = fmt.Sprintf("%s-%d", svc.Name, chunk)
		}
		labels := map[string]string{discoveryv1.LabelServiceName: svc.Name, discoveryv1.LabelManagedBy: ManagedBy}
		for _, k := range []string{commonv1alpha1.LabelManagedBy, trainingv1alpha1.LabelJobName, trainingv1alpha1.LabelRun} {
			labels[k] = svc.Labels[k]
		}
		out = append(out, discoveryv1.EndpointSlice{
			TypeMeta: metav1.TypeMeta{APIVersion: discoveryv1.SchemeGroupVersion.String(), Kind: "EndpointSlice"},
			ObjectMeta: metav1.ObjectMeta{
				Namespace: svc.Namespace, Name: name, Labels: labels,
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID, Controller: ptr.To(true),
				}},
			},
			AddressType: discoveryv1.AddressType(family),
			Endpoints:   eps,
			Ports:       ports,
		})
	}
	return out
}

// rankIndex is the completion index of a rank of the run whose Job and
// Service are named job, and whether p is one.
func rankIndex(p *corev1.Pod, job string, uid types.UID) (int, bool) {
	owner := metav1.GetControllerOf(p)
	if uid == "" || owner == nil || owner.Kind != "Job" || owner.APIVersion != batchv1.SchemeGroupVersion.String() || owner.Name != job || owner.UID != uid {
		return 0, false
	}
	if p.Spec.Subdomain != job || p.Spec.Hostname == "" {
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
