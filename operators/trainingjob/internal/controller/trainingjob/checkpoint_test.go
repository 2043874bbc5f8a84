package trainingjob

import (
	"context"
	"strings"
	"testing"
	"time"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// TestCheckpointClaimRetainOrDeleteOnDeletionAndTTL deletes four
// TrainingJobs, directly or by ttlSecondsAfterFinished, with either
// deletionPolicy; kube-controller-manager's garbage collector runs. Only
// Delete removes the claim; Retain keeps it, and a TrainingJob of the same
// name created later picks it up again.
func TestCheckpointClaimRetainOrDeleteOnDeletionAndTTL(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	clk := &testClock{}
	startOperator(t, func(r *Reconciler) { r.Clock = clk })

	cases := map[string]struct {
		policy commonv1alpha1.DeletionPolicy
		ttl    bool
	}{
		"retain-ttl":    {policy: commonv1alpha1.DeletionPolicyRetain, ttl: true},
		"delete-ttl":    {policy: commonv1alpha1.DeletionPolicyDelete, ttl: true},
		"retain-delete": {policy: commonv1alpha1.DeletionPolicyRetain},
		"delete-delete": {policy: commonv1alpha1.DeletionPolicyDelete},
	}
	tjs := map[string]*trainingv1alpha1.TrainingJob{}
	for name, tc := range cases {
		tj := checkpointed(ns, name, 1, 3, 0)
		tj.Spec.Checkpoint.DeletionPolicy = tc.policy
		if tc.ttl {
			tj.Spec.RunPolicy.TTLSecondsAfterFinished = ptr.To[int32](60)
		}
		if err := c.Create(t.Context(), tj); err != nil {
			t.Fatal(err)
		}
		tjs[name] = tj
	}
	claims := map[string]*corev1.PersistentVolumeClaim{}
	for name, tc := range cases {
		claim := &corev1.PersistentVolumeClaim{}
		testenv.Eventually(t, name+" claim", func(ctx context.Context) (bool, error) {
			err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-checkpoint"}, claim)
			return err == nil, client.IgnoreNotFound(err)
		})
		if owned := metav1.IsControlledBy(claim, tjs[name]); owned != (tc.policy == commonv1alpha1.DeletionPolicyDelete) {
			t.Errorf("%s: claim controlled by the TrainingJob = %v with deletionPolicy %s", name, owned, tc.policy)
		}
		claims[name] = claim
		if tc.ttl {
			succeed(t, c, tjs[name])
		} else {
			waitPyTorchJob(t, c, ns, name+"-r1")
			if err := c.Delete(t.Context(), tjs[name]); err != nil {
				t.Fatal(err)
			}
		}
	}
	clk.advance(2 * time.Minute)
	for name, tc := range cases {
		if tc.ttl {
			poke(t, c, tjs[name])
		}
	}
	for name, tc := range cases {
		testenv.WaitGone(t, c, tjs[name])
		// The garbage collector has processed the TrainingJob once its
		// Kubeflow job is gone; only then is a kept claim meaningful.
		testenv.WaitGone(t, c, &kubeflowv1.PyTorchJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-r1"}})
		if tc.policy == commonv1alpha1.DeletionPolicyDelete {
			testenv.WaitGone(t, c, claims[name])
			continue
		}
		got := &corev1.PersistentVolumeClaim{}
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(claims[name]), got); err != nil || !got.DeletionTimestamp.IsZero() {
			t.Errorf("%s: the retained claim is gone or going: %v %v", name, err, got.DeletionTimestamp)
		}
	}

	// A new TrainingJob of the same name resumes from the retained claim.
	again := checkpointed(ns, "retain-delete", 1, 3, 0)
	if err := c.Create(t.Context(), again); err != nil {
		t.Fatal(err)
	}
	job := waitPyTorchJob(t, c, ns, "retain-delete-r1")
	if !mountsCheckpoint(job.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeMaster].Template.Spec, "retain-delete-checkpoint") {
		t.Error("the new TrainingJob does not mount the retained claim")
	}
	got := &corev1.PersistentVolumeClaim{}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(claims["retain-delete"]), got); err != nil || got.UID != claims["retain-delete"].UID {
		t.Errorf("the retained claim was replaced: %v", err)
	}
}

func TestExistingCheckpointClaim(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	startOperator(t, nil)

	claim := func(name string, mode corev1.PersistentVolumeAccessMode) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{mode},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}
	}
	tjFor := func(name, claimName string, mode corev1.PersistentVolumeAccessMode) *trainingv1alpha1.TrainingJob {
		tj := newTrainingJob(ns, name, 2)
		tj.Spec.Checkpoint = &trainingv1alpha1.Checkpoint{ClaimName: claimName, AccessMode: mode, MountPath: "/ckpt"}
		if err := c.Create(t.Context(), tj); err != nil {
			t.Fatal(err)
		}
		return tj
	}

	// An existing claim that cannot be shared by every pod stalls a job
	// that asks for ReadWriteMany.
	if err := c.Create(t.Context(), claim("single", corev1.ReadWriteOnce)); err != nil {
		t.Fatal(err)
	}
	mismatch := tjFor("mismatch", "single", corev1.ReadWriteMany)
	got := waitTJ(t, c, mismatch, "Stalled", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, commonv1alpha1.ConditionStalled)
	})
	if cond := conditions.Get(got, trainingv1alpha1.ConditionCheckpointReady); cond == nil || cond.Reason != ReasonAccessModeMissing || !strings.Contains(cond.Message, "ReadWriteMany") {
		t.Errorf("CheckpointReady %+v", cond)
	}

	// A missing claim keeps the job waiting until it appears; every pod
	// mounts a ReadWriteMany claim.
	waiting := tjFor("waiting", "shared", corev1.ReadWriteMany)
	waitTJ(t, c, waiting, "waiting for the claim", func(tj *trainingv1alpha1.TrainingJob) bool {
		cond := conditions.Get(tj, trainingv1alpha1.ConditionCheckpointReady)
		return cond != nil && cond.Reason == commonv1alpha1.ReasonDependencyNotFound && conditions.IsTrue(tj, commonv1alpha1.ConditionReconciling)
	})
	testenv.WaitForEvent(t, c, waiting, "WaitingForCheckpointClaim")
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "waiting-r1"}, &kubeflowv1.PyTorchJob{}); !apierrors.IsNotFound(err) {
		t.Fatalf("no run may start without its checkpoint claim, got %v", err)
	}
	if err := c.Create(t.Context(), claim("shared", corev1.ReadWriteMany)); err != nil {
		t.Fatal(err)
	}
	job := waitPyTorchJob(t, c, ns, "waiting-r1")
	for role, rs := range job.Spec.PyTorchReplicaSpecs {
		if !mountsCheckpoint(rs.Template.Spec, "shared") || envOf(rs.Template.Spec.Containers[0])["MLPLATFORM_CHECKPOINT_DIR"] != "/ckpt" {
			t.Errorf("ReadWriteMany: %s must mount the claim at /ckpt", role)
		}
	}
	got = waitTJ(t, c, waiting, "CheckpointReady", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, trainingv1alpha1.ConditionCheckpointReady)
	})
	if got.Status.CheckpointClaim != "shared" {
		t.Errorf("status.checkpointClaim %q", got.Status.CheckpointClaim)
	}
	// The operator never takes ownership of a claim it did not create.
	shared := &corev1.PersistentVolumeClaim{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "shared"}, shared); err != nil || len(shared.OwnerReferences) != 0 {
		t.Errorf("existing claim owners %v (%v)", shared.OwnerReferences, err)
	}
}

// TestForeignClaimUnderTheCheckpointNameStalls: a claim the operator did
// not create is never used as the job's own.
func TestForeignClaimUnderTheCheckpointNameStalls(t *testing.T) {
	c := adminClient(t)
	ns := createNamespace(t, c)
	startOperator(t, nil)

	foreign := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "squat-checkpoint"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if err := c.Create(t.Context(), foreign); err != nil {
		t.Fatal(err)
	}
	tj := checkpointed(ns, "squat", 1, 3, 0)
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	got := waitTJ(t, c, tj, "Stalled", func(tj *trainingv1alpha1.TrainingJob) bool {
		return conditions.IsTrue(tj, commonv1alpha1.ConditionStalled)
	})
	if r := conditions.Get(got, commonv1alpha1.ConditionStalled).Reason; r != commonv1alpha1.ReasonNameTaken {
		t.Errorf("Stalled reason %s, want %s", r, commonv1alpha1.ReasonNameTaken)
	}
	if names := jobsOf(t, c, tj); len(names) != 0 {
		t.Errorf("jobs %v were created on a foreign claim", names)
	}
}
