package health

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/yaml"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
)

// deployed is the Argo CD configuration users apply (deploy/argocd).
var deployed = filepath.Join("..", "..", "deploy", "argocd", "argocd-cm-health.yaml")

// obj builds test objects of every kind with the conditions helpers the
// operators use, so the rows read like the operators' status functions.
type obj struct {
	o conditions.Object
}

func featureStore() *obj {
	return &obj{&featuresv1alpha1.FeatureStore{
		TypeMeta:   metav1.TypeMeta{APIVersion: featuresv1alpha1.GroupVersion.String(), Kind: "FeatureStore"},
		ObjectMeta: metav1.ObjectMeta{Name: "sales", Namespace: "team-a", Generation: 1},
	}}
}

func backend() *obj {
	return &obj{&featuresv1alpha1.FeatureStoreBackend{
		TypeMeta:   metav1.TypeMeta{APIVersion: featuresv1alpha1.GroupVersion.String(), Kind: "FeatureStoreBackend"},
		ObjectMeta: metav1.ObjectMeta{Name: "shared-postgres", Generation: 1},
	}}
}

func notebook() *obj {
	return &obj{&notebooksv1alpha1.Notebook{
		TypeMeta:   metav1.TypeMeta{APIVersion: notebooksv1alpha1.GroupVersion.String(), Kind: "Notebook"},
		ObjectMeta: metav1.ObjectMeta{Name: "nb", Namespace: "team-a", Generation: 1},
	}}
}

func trainingJob() *obj {
	return &obj{&trainingv1alpha1.TrainingJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: trainingv1alpha1.GroupVersion.String(), Kind: "TrainingJob"},
		ObjectMeta: metav1.ObjectMeta{Name: "mnist", Namespace: "team-a", Generation: 1},
	}}
}

func (b *obj) observed() *obj {
	setObservedGeneration(b.o, b.o.GetGeneration())
	return b
}

func (b *obj) with(f func(o conditions.Object)) *obj {
	f(b.o)
	return b
}

func (b *obj) true(t, reason string) *obj {
	conditions.MarkTrue(b.o, t, reason, reason+" message")
	return b
}

func (b *obj) false(t, reason string) *obj {
	conditions.MarkFalse(b.o, t, reason, reason+" message")
	return b
}

func (b *obj) generation(g int64) *obj {
	b.o.SetGeneration(g)
	return b
}

func (b *obj) deleting() *obj {
	now := metav1.Now()
	b.o.SetDeletionTimestamp(&now)
	b.o.SetFinalizers([]string{"mlplatform.dev/cleanup"})
	return b
}

func setObservedGeneration(o conditions.Object, g int64) {
	switch o := o.(type) {
	case *featuresv1alpha1.FeatureStore:
		o.Status.ObservedGeneration = g
	case *featuresv1alpha1.FeatureStoreBackend:
		o.Status.ObservedGeneration = g
	case *notebooksv1alpha1.Notebook:
		o.Status.ObservedGeneration = g
	case *trainingv1alpha1.TrainingJob:
		o.Status.ObservedGeneration = g
	}
}

var (
	ready       = func(o conditions.Object) { conditions.MarkReady(o, commonv1alpha1.ReasonReconciled, "ok") }
	reconciling = func(reason string) func(conditions.Object) {
		return func(o conditions.Object) { conditions.MarkReconciling(o, reason, "waiting") }
	}
	stalled = func(reason string) func(conditions.Object) {
		return func(o conditions.Object) { conditions.MarkStalled(o, reason, "a person must act") }
	}
)

type row struct {
	obj     *obj
	kstatus status.Status
	argo    string
}

// rows are the states of every kind with the health each tool must report.
// They are the shapes the operators write through shared/conditions; the
// operators' own tests check that their status functions produce them.
func rows() map[string]row {
	return map[string]row{
		// FeatureStore: operators/featurestore/internal/controller/featurestore/featurestore_controller_status.go.
		"FeatureStore created, not yet seen by the operator": {featureStore(), status.CurrentStatus, Progressing},
		"FeatureStore waiting for its server":                {featureStore().observed().with(reconciling(featuresv1alpha1.ReasonWaitingForServer)), status.InProgressStatus, Progressing},
		"FeatureStore ready":                                 {featureStore().observed().with(ready), status.CurrentStatus, Healthy},
		"FeatureStore database name taken":                   {featureStore().observed().with(stalled(featuresv1alpha1.ReasonConflict)), status.FailedStatus, Degraded},
		"FeatureStore spec changed, not yet observed":        {featureStore().observed().with(ready).generation(2), status.InProgressStatus, Progressing},
		"FeatureStore deleting":                              {featureStore().observed().with(ready).deleting(), status.TerminatingStatus, Progressing},
		"FeatureStore cleanup failing":                       {featureStore().observed().with(ready).true(commonv1alpha1.ConditionCleanupFailed, commonv1alpha1.ReasonCleanupError).deleting(), status.TerminatingStatus, Degraded},
		// FeatureStoreBackend: operators/featurestore/internal/controller/featurestorebackend/featurestorebackend_controller_status.go.
		"FeatureStoreBackend admin Secret missing": {backend().observed().with(reconciling(featuresv1alpha1.ReasonAdminSecretNotFound)), status.InProgressStatus, Progressing},
		"FeatureStoreBackend ready":                {backend().observed().with(ready), status.CurrentStatus, Healthy},
		"FeatureStoreBackend wrong password":       {backend().observed().with(stalled(featuresv1alpha1.ReasonAuthenticationFailed)), status.FailedStatus, Degraded},
		"FeatureStoreBackend deletion blocked":     {backend().observed().with(ready).true(featuresv1alpha1.ConditionDeletionBlocked, featuresv1alpha1.ReasonInUse).deleting(), status.TerminatingStatus, Progressing},
		// Notebook: operators/notebook/internal/controller/notebook/notebook_controller_status.go.
		"Notebook starting": {notebook().observed().with(reconciling(notebooksv1alpha1.ReasonStarting)), status.InProgressStatus, Progressing},
		"Notebook running":  {notebook().observed().with(ready).false(commonv1alpha1.ConditionSuspended, notebooksv1alpha1.ReasonRunning).false(notebooksv1alpha1.ConditionCulled, notebooksv1alpha1.ReasonRunning), status.CurrentStatus, Healthy},
		// Suspended and culled: settled, so Ready is True (the notebook is
		// as asked) and Suspended or Culled says it is stopped.
		"Notebook suspended": {notebook().observed().with(ready).true(commonv1alpha1.ConditionSuspended, notebooksv1alpha1.ReasonSuspended), status.CurrentStatus, Suspended},
		"Notebook culled":    {notebook().observed().with(ready).true(notebooksv1alpha1.ConditionCulled, notebooksv1alpha1.ReasonIdle), status.CurrentStatus, Suspended},
		// Queued: stopped until Kueue admits it, as a queued TrainingJob.
		"Notebook queued":                     {notebook().observed().with(reconciling(notebooksv1alpha1.ReasonQueued)).true(notebooksv1alpha1.ConditionQueued, notebooksv1alpha1.ReasonQueued), status.InProgressStatus, Suspended},
		"Notebook image cannot be pulled":     {notebook().observed().with(stalled(notebooksv1alpha1.ReasonPodStartFailed)), status.FailedStatus, Degraded},
		"Notebook invalid accelerator":        {notebook().observed().with(stalled(notebooksv1alpha1.ReasonInvalidAccelerator)), status.FailedStatus, Degraded},
		"Notebook spec changed, not observed": {notebook().observed().with(ready).generation(3), status.InProgressStatus, Progressing},
		// TrainingJob: operators/trainingjob/internal/controller/trainingjob/trainingjob_controller_status.go.
		"TrainingJob creating its job": {trainingJob().observed().with(reconciling(commonv1alpha1.ReasonProgressing)), status.InProgressStatus, Progressing},
		"TrainingJob queued":           {trainingJob().observed().with(reconciling("Queued")).true(trainingv1alpha1.ConditionQueued, "Queued"), status.InProgressStatus, Suspended},
		// Running: the operator removes Reconciling (TestHealthOfEveryState
		// in the TrainingJob operator runs its own status function).
		"TrainingJob running":    {trainingJob().observed().true(trainingv1alpha1.ConditionRunning, "Running"), status.CurrentStatus, Progressing},
		"TrainingJob restarting": {trainingJob().observed().with(reconciling("Restarting")).true(trainingv1alpha1.ConditionRestarting, "NodeFailure"), status.InProgressStatus, Progressing},
		"TrainingJob succeeded": {trainingJob().observed().with(func(o conditions.Object) {
			conditions.MarkSucceeded(o, "Succeeded", "done")
		}), status.CurrentStatus, Healthy},
		// Failed: terminal and not healthy, so Stalled is True with it.
		"TrainingJob failed": {trainingJob().observed().with(func(o conditions.Object) {
			conditions.MarkFailed(o, "Failed", "exit code 1")
			conditions.MarkTrue(o, commonv1alpha1.ConditionStalled, "Failed", "exit code 1")
		}), status.FailedStatus, Degraded},
		"TrainingJob suspended": {trainingJob().observed().true(commonv1alpha1.ConditionSuspended, "Suspended"), status.CurrentStatus, Suspended},
		"TrainingJob invalid":   {trainingJob().observed().with(stalled(commonv1alpha1.ReasonInvalidSpec)), status.FailedStatus, Degraded},
	}
}

// TestKstatusAndArgoCDAgreeOnEveryState runs the real kstatus library and
// the shipped Argo CD health checks on every kind in every state.
func TestKstatusAndArgoCDAgreeOnEveryState(t *testing.T) {
	for name, tc := range rows() {
		t.Run(name, func(t *testing.T) {
			ks, err := Kstatus(tc.obj.o.(runtime.Object))
			if err != nil {
				t.Fatal(err)
			}
			if ks.Status != tc.kstatus {
				t.Errorf("kstatus %s (%s), want %s", ks.Status, ks.Message, tc.kstatus)
			}
			argo, err := ArgoCD(tc.obj.o.(runtime.Object))
			if err != nil {
				t.Fatal(err)
			}
			if argo.Status != tc.argo {
				t.Errorf("Argo CD %s (%s), want %s", argo.Status, argo.Message, tc.argo)
			}
			if argo.Message == "" {
				t.Error("Argo CD health without a message")
			}
		})
	}
}

// TestArgoCDHealthChecksSurviveCarelessObjects runs every check on objects
// a careless writer or an old operator version could leave: a check that
// errors makes Argo CD show the object as Unknown with a Lua stack trace.
func TestArgoCDHealthChecksSurviveCarelessObjects(t *testing.T) {
	scripts, err := ArgoCDScripts()
	if err != nil {
		t.Fatal(err)
	}
	for name, o := range map[string]string{
		"no status":                      `{metadata: {name: x}}`,
		"empty conditions":               `{metadata: {name: x, generation: 1}, status: {conditions: []}}`,
		"condition without type":         `{metadata: {name: x}, status: {conditions: [{status: "True"}]}}`,
		"condition without reason":       `{metadata: {name: x}, status: {conditions: [{type: Stalled, status: "True"}]}}`,
		"no generation":                  `{metadata: {name: x}, status: {observedGeneration: 2, conditions: [{type: Ready, status: "True", reason: R}]}}`,
		"unknown condition status":       `{metadata: {name: x}, status: {conditions: [{type: Ready, status: "Unknown", reason: R, message: m}]}}`,
		"deleting without conditions":    `{metadata: {name: x, deletionTimestamp: "2026-01-01T00:00:00Z"}, status: {conditions: []}}`,
		"a message that is not a string": `{metadata: {name: x}, status: {conditions: [{type: Ready, status: "True", reason: R, message: 42}]}}`,
	} {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(o), &m); err != nil {
			t.Fatal(err)
		}
		for _, key := range Keys(scripts) {
			t.Run(name+"/"+key, func(t *testing.T) {
				h, err := RunLua(scripts[key], m)
				if err != nil {
					t.Fatalf("%v", err)
				}
				if h.Status == Healthy && (name == "no status" || name == "empty conditions") {
					t.Errorf("%s is Healthy before the operator reported anything", name)
				}
			})
		}
	}
}

// TestDeployedArgoCDConfigurationIsTheseChecks keeps deploy/argocd, which
// users apply, identical to the checks tested here. Run with
// UPDATE_ARGOCD=1 to rewrite it after changing a script.
func TestDeployedArgoCDConfigurationIsTheseChecks(t *testing.T) {
	scripts, err := ArgoCDScripts()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString(`# Argo CD health checks for every ml-platform kind, as resource
# customizations of the argocd-cm ConfigMap. Generated from
# shared/health/argocd/*.lua (tested there against kstatus and every state
# the operators produce); do not edit by hand: change the scripts and run
#   cd shared && UPDATE_ARGOCD=1 go test ./health/
# Merge it into your argocd-cm (deploy/argocd/README.md).
apiVersion: v1
kind: ConfigMap
metadata:
  name: argocd-cm
  namespace: argocd
  labels:
    app.kubernetes.io/name: argocd-cm
    app.kubernetes.io/part-of: argocd
data:
`)
	for _, key := range Keys(scripts) {
		b.WriteString("  resource.customizations.health." + key + ": |\n")
		for _, line := range strings.Split(strings.TrimRight(scripts[key], "\n"), "\n") {
			if line == "" {
				b.WriteString("\n")
				continue
			}
			b.WriteString("    " + line + "\n")
		}
	}
	want := b.String()
	if os.Getenv("UPDATE_ARGOCD") != "" {
		if err := os.WriteFile(deployed, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(deployed)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("%s differs from shared/health/argocd: run `cd shared && UPDATE_ARGOCD=1 go test ./health/`", deployed)
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(got, &cm); err != nil {
		t.Fatal(err)
	}
	for _, key := range Keys(scripts) {
		if cm.Data["resource.customizations.health."+key] != scripts[key] {
			t.Errorf("the ConfigMap's %s does not decode to the script", key)
		}
	}
	for _, kind := range []string{"training.mlplatform.dev_TrainingJob", "notebooks.mlplatform.dev_Notebook", "features.mlplatform.dev_FeatureStore", "features.mlplatform.dev_FeatureStoreBackend"} {
		if _, ok := scripts[kind]; !ok {
			t.Errorf("no health check for %s", kind)
		}
	}
}
