package notebook

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/config"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/culling"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/jupyter"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/lifecycle"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/render"
	"github.com/ml-platform/ml-platform/shared/apireject"
	"github.com/ml-platform/ml-platform/shared/apply"
	"github.com/ml-platform/ml-platform/shared/featureref"
)

// scope is what one reconcile learned and decided, phase by phase.
type scope struct {
	nb     *notebooksv1alpha1.Notebook
	before *notebooksv1alpha1.Notebook
	now    time.Time

	input  render.Input
	policy config.Policy
	stores *featureref.Resolution
	// stalled is a reason the Notebook cannot progress without a change
	// from its user; stalledMsg says why.
	stalled, stalledMsg string
	// waiting says what the operator waits for, when it is not the pod.
	waiting string

	// claim is the workspace claim as observed, or as this reconcile
	// created it; nil when ensureWorkspace did not get to it.
	claim *corev1.PersistentVolumeClaim
	// workspace is what resizeWorkspace found; nil when it did not run.
	workspace *workspaceObservation

	token string
	sts   *appsv1.StatefulSet // as observed, nil when absent
	pods  []corev1.Pod
	// createFailure is the StatefulSet controller's latest FailedCreate
	// event for this start while the StatefulSet has no pod; nil otherwise.
	createFailure *corev1.Event

	// queue is what Kueue's Workload for the StatefulSet says, nil when
	// there is none (or no queue, or no Kueue).
	queue *queueObservation
	// held: a start waits for Kueue to release the previous run.
	held bool

	// running: the StatefulSet asks for a pod and it is ready.
	running bool
	// probe is the latest answer of this run of the server, however old;
	// nil before the first. probePending: a newer one is asked for, and
	// the decisions that need the server's activity wait for it.
	probe        *jupyter.Observation
	probePending bool

	// Decisions.
	replicas     int32
	annotations  map[string]string
	decision     *culling.Decision
	culled       string // reason while culled
	justCulled   bool
	restarted    bool
	wasCulledFor time.Duration
	deferred     bool
	// awaitingProbe: a template change waits for the probe's answer.
	awaitingProbe bool
	applied       bool // a deferred or pending template change was applied
	stsWritten    bool
}

func (r *Reconciler) resolveInputs(ctx context.Context, s *scope) (ctrl.Result, error) {
	nb := s.nb
	s.input = render.Input{Notebook: nb, Config: r.Config}
	s.policy = r.Config.Culling.PolicyFor(nb.Spec.Culling)
	if err := apply.NamespaceReserved("Notebook", nb.Namespace); err != nil {
		s.stalled, s.stalledMsg = commonv1alpha1.ReasonNamespaceReserved, err.Error()
		return ctrl.Result{}, nil //nolint:nilerr // reported as Stalled, a retry cannot help
	}
	if msg := undeclaredMounts(nb); msg != "" {
		s.stalled, s.stalledMsg = commonv1alpha1.ReasonInvalidSpec, msg
		return ctrl.Result{}, nil
	}
	if acc := nb.Spec.Resources.Accelerators; acc != nil {
		// An unknown accelerator type is the user's to fix: the Notebook
		// stalls with the catalog's message rather than retrying.
		class, resolveErr := r.Catalog.Resolve(acc)
		if resolveErr != nil {
			s.stalled, s.stalledMsg = notebooksv1alpha1.ReasonInvalidAccelerator, resolveErr.Error()
			return ctrl.Result{}, nil //nolint:nilerr // reported as Stalled, a retry cannot help
		}
		s.input.Accelerator = class
	}
	if len(nb.Spec.FeatureStores) > 0 {
		res, err := featureref.Resolve(ctx, r.Client, nb.Namespace, nb.Spec.FeatureStores)
		if err != nil {
			return ctrl.Result{}, err
		}
		s.stores = &res
		s.input.Stores = res.Ready
	}
	return ctrl.Result{}, nil
}

// undeclaredMounts checks what CEL cannot afford to: every volume mount
// names a declared volume.
func undeclaredMounts(nb *notebooksv1alpha1.Notebook) string {
	declared := map[string]bool{}
	for _, v := range nb.Spec.Volumes {
		declared[v.Name] = true
	}
	for _, m := range nb.Spec.VolumeMounts {
		if !declared[m.Name] {
			return fmt.Sprintf("volumeMounts entry %s names no entry of volumes", m.Name)
		}
	}
	return ""
}

// applier writes the Notebook's children; what it finds foreign stalls
// the Notebook with NameTaken.
func (r *Reconciler) applier() *apply.Applier {
	return &apply.Applier{
		Client: r.Client, APIReader: r.APIReader,
		FieldOwner: render.OperatorName, HashAnnotation: render.AnnotationAppliedHash,
	}
}

// ours are the objects labelled as the operator's: a retained workspace
// outlives its Notebook and is taken up again by a new one of its name.
var ours = apply.ManagedBy(render.OperatorName, "rename the Notebook")

// applyChild writes desired with the applier; a refused child is wrapped
// as errChildRejected.
func (r *Reconciler) applyChild(ctx context.Context, desired client.Object) (bool, error) {
	written, err := r.applier().Apply(ctx, desired, ours)
	if err != nil {
		return false, rejected(desired, err)
	}
	return written, nil
}

// errChildRejected is the API server refusing a child the operator
// derived from the Notebook: only a change of the Notebook can help.
type errChildRejected struct {
	kind, name string
	err        error
}

func (e errChildRejected) Error() string {
	return fmt.Sprintf("The API server refused the %s %s; change the Notebook to fix it: %v", e.kind, e.name, e.err)
}

func (e errChildRejected) Unwrap() error { return e.err }

// rejected wraps err when it is the API server refusing obj itself, or an
// admission webhook denying it (Kueue's StatefulSet webhook refuses a
// change of the pod template's resources while it manages the
// StatefulSet). A webhook's refusal of a transient state shows as Stalled
// only until the watches bring the Notebook back and the write passes.
func rejected(obj client.Object, err error) error {
	if !apireject.Is(err) && !webhookDenied(err) {
		return err
	}
	return errChildRejected{kind: obj.GetObjectKind().GroupVersionKind().Kind, name: obj.GetName(), err: err}
}

// webhookDenied reports whether err is an admission webhook's refusal,
// which the API server reports as Forbidden with the webhook's name.
func webhookDenied(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "admission webhook") && strings.Contains(err.Error(), "denied the request")
}

// handleApplyErr turns a name conflict or a refused child into a Stalled
// Notebook. Returning no error means no retry with backoff: the watches
// bring the Notebook back when its spec changes.
func handleApplyErr(s *scope, err error) (ctrl.Result, error) {
	var taken *apply.ForeignError
	if errors.As(err, &taken) {
		s.stalled, s.stalledMsg = commonv1alpha1.ReasonNameTaken, taken.Error()
		return ctrl.Result{}, nil
	}
	var refused errChildRejected
	if errors.As(err, &refused) {
		s.stalled, s.stalledMsg = commonv1alpha1.ReasonChildRejected, refused.Error()
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, err
}

func (r *Reconciler) ensureTokenSecret(ctx context.Context, s *scope) (ctrl.Result, error) {
	nb := s.nb
	key := client.ObjectKey{Namespace: nb.Namespace, Name: render.TokenSecretName(nb)}
	secret := &corev1.Secret{}
	err := r.Client.Get(ctx, key, secret)
	if err == nil {
		s.token = string(secret.Data[render.TokenKey])
		return ctrl.Result{}, nil
	}
	if !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	// The cache may lag behind a Secret created a moment ago: ask the API
	// server before generating a token that would never be used.
	if err := r.APIReader.Get(ctx, key, secret); err == nil {
		if err := apply.Check(secret, "Secret", ours); err != nil {
			return handleApplyErr(s, err)
		}
		s.token = string(secret.Data[render.TokenKey])
		return ctrl.Result{}, nil
	} else if !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	newToken := r.NewToken
	if newToken == nil {
		newToken = randomToken
	}
	token, err := newToken()
	if err != nil {
		return ctrl.Result{}, err
	}
	desired := render.TokenSecret(nb, token)
	if err := r.applier().Create(ctx, desired, ours); err != nil && !apierrors.IsAlreadyExists(err) {
		desired.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
		return handleApplyErr(s, rejected(desired, err))
	}
	s.token = token
	return ctrl.Result{}, nil
}

func randomToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// getOwned reads a child from the cache; nil when absent.
func getOwned[T client.Object](ctx context.Context, c client.Client, key client.ObjectKey, obj T) (T, error) {
	var zero T
	if err := c.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return zero, nil
		}
		return zero, err
	}
	return obj, nil
}

// ensureWorkspace creates the workspace claim at spec.workspace.size and
// keeps an existing claim at the size it asks for: growing it is
// resizeWorkspace's, which the cluster may refuse without that holding up
// the Notebook's other children.
func (r *Reconciler) ensureWorkspace(ctx context.Context, s *scope) (ctrl.Result, error) {
	key := client.ObjectKey{Namespace: s.nb.Namespace, Name: render.WorkspaceClaimName(s.nb)}
	live, err := getOwned(ctx, r.Client, key, &corev1.PersistentVolumeClaim{})
	if err != nil {
		return ctrl.Result{}, err
	}
	if live != nil && !live.DeletionTimestamp.IsZero() {
		// A workspace being deleted (its old Notebook had deletionPolicy
		// Delete) cannot be reused; wait for it to go.
		s.waiting = "Waiting for the previous workspace claim " + live.Name + " to be deleted"
		return ctrl.Result{RequeueAfter: 5 * time.Second}, nil
	}
	size := render.WorkspaceSize(s.nb)
	if requested, ok := claimSize(live); ok {
		size = requested
	}
	desired := render.WorkspaceClaim(s.input, size)
	if _, err := r.applyChild(ctx, desired); err != nil {
		return handleApplyErr(s, err)
	}
	s.claim = live
	if live == nil {
		s.claim = desired
	}
	return ctrl.Result{}, nil
}

// claimSize is the storage a claim asks for; false for no claim.
func claimSize(claim *corev1.PersistentVolumeClaim) (resource.Quantity, bool) {
	if claim == nil {
		return resource.Quantity{}, false
	}
	size, ok := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	return size, ok
}

// workspaceObservation is the workspace claim's size and the resize that
// waits, if any.
type workspaceObservation struct {
	size     resource.Quantity
	capacity *resource.Quantity
	// pending is the reason spec.workspace.size is not applied yet, empty
	// when it is; pendingMsg says why.
	pending, pendingMsg string
}

// resizeWorkspace grows the workspace claim to spec.workspace.size. The
// API server lets a claim grow only once it is bound to a volume, and only
// when its StorageClass allows volume expansion; until then the claim
// keeps its size, the Notebook runs on it, and WorkspaceResizePending says
// why. It runs after the phases that manage the server, and a refusal is
// reported rather than returned, so a resize the cluster cannot do never
// holds up a suspend, a cull or a change of the StatefulSet. Every
// reconcile tries again: a class that allows expansion later takes effect
// without a change of the Notebook.
func (r *Reconciler) resizeWorkspace(ctx context.Context, s *scope) (ctrl.Result, error) {
	have, ok := claimSize(s.claim)
	if !ok {
		return ctrl.Result{}, nil
	}
	ws := &workspaceObservation{size: have}
	if capacity, ok := s.claim.Status.Capacity[corev1.ResourceStorage]; ok {
		ws.capacity = &capacity
	}
	s.workspace = ws
	want := render.WorkspaceSize(s.nb)
	if want.Cmp(have) <= 0 {
		return ctrl.Result{}, nil
	}
	name := s.claim.Name
	if s.claim.Status.Phase != corev1.ClaimBound {
		ws.pending = notebooksv1alpha1.ReasonWorkspaceNotBound
		ws.pendingMsg = fmt.Sprintf("The workspace claim %s asks for %s and is not bound to a volume yet (its StorageClass may bind one only when the Jupyter server starts); it is grown to %s once it is bound",
			name, have.String(), want.String())
		return ctrl.Result{}, nil
	}
	_, err := r.applier().Apply(ctx, render.WorkspaceClaim(s.input, want), ours)
	switch {
	case err == nil:
		ws.size = want
	case apireject.Is(err) || apierrors.IsForbidden(err):
		ws.pending = notebooksv1alpha1.ReasonWorkspaceResizeRefused
		ws.pendingMsg = fmt.Sprintf("The API server refused to grow the workspace claim %[1]s from %[2]s to %[3]s, so it stays at %[2]s. Set spec.workspace.size back to %[2]s, or have the StorageClass allow volume expansion: %[4]s",
			name, have.String(), want.String(), apireject.Message(err))
	default:
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}

// nilIfNone turns a typed nil pointer into an untyped nil interface.
func nilIfNone[T client.Object](obj T) client.Object {
	if v := reflect.ValueOf(obj); !v.IsValid() || v.IsNil() {
		return nil
	}
	return obj
}

func (r *Reconciler) ensureService(ctx context.Context, s *scope) (ctrl.Result, error) {
	desired := render.Service(s.input)
	if _, err := r.applyChild(ctx, desired); err != nil {
		return handleApplyErr(s, err)
	}
	return ctrl.Result{}, nil
}

func (r *Reconciler) ensureNetworkPolicy(ctx context.Context, s *scope) (ctrl.Result, error) {
	key := client.ObjectKey{Namespace: s.nb.Namespace, Name: s.nb.Name}
	live, err := getOwned(ctx, r.Client, key, &networkingv1.NetworkPolicy{})
	if err != nil {
		return ctrl.Result{}, err
	}
	desired := render.NetworkPolicy(s.input)
	if desired == nil {
		return ctrl.Result{}, r.deleteOwned(ctx, nilIfNone(live))
	}
	if _, err := r.applyChild(ctx, desired); err != nil {
		return handleApplyErr(s, err)
	}
	return ctrl.Result{}, nil
}

func (r *Reconciler) ensureIngress(ctx context.Context, s *scope) (ctrl.Result, error) {
	key := client.ObjectKey{Namespace: s.nb.Namespace, Name: s.nb.Name}
	live, err := getOwned(ctx, r.Client, key, &networkingv1.Ingress{})
	if err != nil {
		return ctrl.Result{}, err
	}
	desired := render.Ingress(s.input)
	if desired == nil {
		return ctrl.Result{}, r.deleteOwned(ctx, nilIfNone(live))
	}
	if _, err := r.applyChild(ctx, desired); err != nil {
		return handleApplyErr(s, err)
	}
	return ctrl.Result{}, nil
}

func (r *Reconciler) deleteOwned(ctx context.Context, live client.Object) error {
	if live == nil {
		return nil
	}
	return client.IgnoreNotFound(r.Client.Delete(ctx, live, client.Preconditions{UID: ptrTo(live.GetUID())}))
}

func ptrTo[T any](v T) *T { return &v }

// observeServer reads the StatefulSet and its pods, and, when the pod is
// ready, what the Monitor last saw of Jupyter.
func (r *Reconciler) observeServer(ctx context.Context, s *scope) (ctrl.Result, error) {
	nb := s.nb
	sts, err := getOwned(ctx, r.Client, client.ObjectKey{Namespace: nb.Namespace, Name: nb.Name}, &appsv1.StatefulSet{})
	if err != nil {
		return ctrl.Result{}, err
	}
	if sts == nil {
		return ctrl.Result{}, nil
	}
	s.sts = sts
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(nb.Namespace), client.MatchingLabels(render.SelectorLabels(nb))); err != nil {
		return ctrl.Result{}, err
	}
	s.pods = pods.Items
	s.running = ptrValue(sts.Spec.Replicas) > 0 && sts.Status.ReadyReplicas > 0 && sts.Status.ObservedGeneration >= sts.Generation
	if ptrValue(sts.Spec.Replicas) > 0 && !hasLivePod(s.pods) {
		if s.createFailure, err = r.latestCreateFailure(ctx, sts); err != nil {
			return ctrl.Result{}, err
		}
	}
	if !s.running || s.token == "" {
		r.probes.Forget(client.ObjectKeyFromObject(nb))
		return ctrl.Result{}, nil
	}
	r.observeJupyter(s)
	return ctrl.Result{}, nil
}

// observeJupyter reads the latest answer of the running server's probe
// and asks the Monitor for a new one when it is older than the decisions
// may use (lifecycle.MaxObservationAge). It never waits for the server:
// the answer brings the Notebook back.
func (r *Reconciler) observeJupyter(s *scope) {
	nb := s.nb
	key := client.ObjectKeyFromObject(nb)
	run := serverRun(nb, s.sts, s.pods)
	latest, ok := r.probes.Latest(key, run)
	if ok {
		s.probe = &latest.Observation
		if s.now.Sub(latest.At) <= lifecycle.MaxObservationAge(s.policy) {
			return
		}
	}
	endpoint := render.URL(nb, r.Config)
	if r.Endpoint != nil {
		endpoint = r.Endpoint(nb)
	}
	r.probes.Request(key, run, jupyter.Target{BaseURL: endpoint, Token: s.token})
	s.probePending = true
}

// serverRun identifies the run of the Notebook's server that a probe now
// sees: the operator's start of it and the pod that serves it. The
// cache may not hold the pod yet; the run then changes once it does, and
// the server is probed again.
func serverRun(nb *notebooksv1alpha1.Notebook, sts *appsv1.StatefulSet, pods []corev1.Pod) jupyter.Run {
	run := jupyter.Run{Notebook: nb.UID, StartedAt: sts.Annotations[render.AnnotationStartedAt]}
	for _, p := range pods {
		if p.DeletionTimestamp.IsZero() && podReady(&p) {
			run.Pod = p.UID
		}
	}
	return run
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func hasLivePod(pods []corev1.Pod) bool {
	for _, p := range pods {
		if p.DeletionTimestamp.IsZero() {
			return true
		}
	}
	return false
}

// latestCreateFailure returns the StatefulSet's most recent FailedCreate
// event, unless it is older than the operator's last start of the server:
// an event from an earlier run says nothing about this one.
func (r *Reconciler) latestCreateFailure(ctx context.Context, sts *appsv1.StatefulSet) (*corev1.Event, error) {
	startedAt, _ := time.Parse(time.RFC3339, sts.Annotations[render.AnnotationStartedAt])
	return r.Events.Latest(ctx, sts.Namespace, sts.UID, startedAt)
}

func ptrValue(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}

// decideLifecycle decides how many replicas run and records why on the
// StatefulSet (package lifecycle).
func (r *Reconciler) decideLifecycle(_ context.Context, s *scope) (ctrl.Result, error) {
	in := lifecycle.Input{
		Now: s.now, Policy: s.policy, Suspend: s.nb.Spec.Suspend,
		RestartRequest: s.nb.Annotations[notebooksv1alpha1.AnnotationRestart],
		ForceRequest:   s.nb.Annotations[notebooksv1alpha1.AnnotationForceUpdate],
		Exists:         s.sts != nil, WasStopped: true, Running: s.running, Probe: s.probe, ProbePending: s.probePending,
		ReportInterval: r.Config.ReportInterval.Duration,
	}
	if s.sts != nil {
		in.Recorded, in.WasStopped = s.sts.Annotations, ptrValue(s.sts.Spec.Replicas) == 0
		in.TemplateChanged = s.sts.Annotations[render.AnnotationTemplateHash] != render.Hash(render.PodTemplate(s.input))
	}
	if s.nb.Status.CullDeadline != nil {
		in.Warned = s.nb.Status.CullDeadline.Time
	}
	out := lifecycle.Decide(in)
	s.replicas, s.annotations, s.decision = out.Replicas, out.Annotations, out.Culling
	s.culled, s.justCulled, s.restarted, s.wasCulledFor = out.Culled, out.JustCulled, out.Restarted, out.WasCulledFor
	s.deferred, s.applied, s.awaitingProbe = out.Deferred, out.Applied, out.AwaitingProbe
	return ctrl.Result{RequeueAfter: out.RequeueAfter}, nil
}

func (r *Reconciler) ensureStatefulSet(ctx context.Context, s *scope) (ctrl.Result, error) {
	if s.deferred || s.awaitingProbe {
		// Keep the running pod; nothing else on the StatefulSet changes
		// while it runs.
		return ctrl.Result{}, nil
	}
	if heldByKueue(s) {
		// Nothing is written, so the next reconcile decides the start
		// again from the same records.
		s.held = true
		s.waiting = "Waiting for Kueue to release the previous run of the Jupyter server before starting it again"
		return ctrl.Result{}, nil
	}
	desired := render.StatefulSet(s.input, render.StatefulSetState{Replicas: s.replicas, Annotations: maps.Clone(s.annotations)})
	// Somebody scaling the StatefulSet by hand is drift of a field the
	// operator owns: apply reverts it, so a culled notebook stays stopped.
	written, err := r.applyChild(ctx, desired)
	if err != nil {
		return handleApplyErr(s, err)
	}
	s.stsWritten = written
	return ctrl.Result{}, nil
}
