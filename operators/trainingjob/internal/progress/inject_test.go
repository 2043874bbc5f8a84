package progress_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	trainingtesting "github.com/ml-platform/ml-platform/apis/training/v1alpha1/testing"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/backend"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/kubeflowjob"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/nativejob"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/progress"
	"github.com/ml-platform/ml-platform/shared/accelerator"
)

// templates are the pod templates of a backend's child.
func templates(t *testing.T, child client.Object) []corev1.PodTemplateSpec {
	t.Helper()
	switch c := child.(type) {
	case *batchv1.Job:
		return []corev1.PodTemplateSpec{c.Spec.Template}
	case *kubeflowv1.PyTorchJob:
		var out []corev1.PodTemplateSpec
		for _, r := range c.Spec.PyTorchReplicaSpecs {
			out = append(out, r.Template)
		}
		return out
	}
	t.Fatalf("unexpected child %T", child)
	return nil
}

// reporterSetup is what a template gives its training container to report.
type reporterSetup struct {
	Audience string
	Env      map[string]string
	Mount    string
}

func reporterOf(tmpl corev1.PodTemplateSpec) reporterSetup {
	var got reporterSetup
	for _, v := range tmpl.Spec.Volumes {
		if v.Name == progress.TokenVolume && v.Projected != nil {
			got.Audience = v.Projected.Sources[0].ServiceAccountToken.Audience
		}
	}
	c := tmpl.Spec.Containers[0]
	for _, m := range c.VolumeMounts {
		if m.Name == progress.TokenVolume {
			got.Mount = m.MountPath
		}
	}
	for _, e := range c.Env {
		switch e.Name {
		case progress.EnvURL, progress.EnvTokenFile, progress.EnvCA, progress.EnvJob:
			if got.Env == nil {
				got.Env = map[string]string{}
			}
			got.Env[e.Name] = e.Value
		}
	}
	return got
}

func TestBothBackendsGivePodsTheReporterSetup(t *testing.T) {
	const ca = "-----BEGIN CERTIFICATE-----\n...\n"
	ep := &progress.Endpoint{URL: "https://tj-operator.mlp-system.svc:9443", CA: func() string { return ca }}
	want := reporterSetup{
		Audience: "training.mlplatform.dev",
		Mount:    "/var/run/secrets/mlplatform.dev/progress",
		Env: map[string]string{
			progress.EnvURL:       "https://tj-operator.mlp-system.svc:9443/v1/namespaces/team-a/trainingjobs/mnist/progress",
			progress.EnvTokenFile: "/var/run/secrets/mlplatform.dev/progress/token",
			progress.EnvCA:        ca,
			progress.EnvJob:       "mnist",
		},
	}
	for name, tc := range map[string]struct {
		progress *progress.Endpoint
		want     reporterSetup
	}{
		"endpoint on":  {progress: ep, want: want},
		"endpoint off": {progress: nil, want: reporterSetup{}},
	} {
		settings := backend.Settings{
			OperatorName: "trainingjob-operator", RunAsUser: 1000, Progress: tc.progress,
			Catalog: accelerator.Catalog{DefaultType: "gpu", Classes: []accelerator.Class{{Type: "gpu", ResourceName: "nvidia.com/gpu"}}},
		}
		for backendName, build := range map[string]func(*trainingv1alpha1.TrainingJob) (client.Object, error){
			"native": func(tj *trainingv1alpha1.TrainingJob) (client.Object, error) {
				return nativejob.NewBackend(settings).Build(tj, 1, nil)
			},
			"kubeflow": func(tj *trainingv1alpha1.TrainingJob) (client.Object, error) {
				return kubeflowjob.NewBackend(settings, nil).Build(tj, 1, nil)
			},
		} {
			t.Run(name+"/"+backendName, func(t *testing.T) {
				child, err := build(trainingtesting.MakeTrainingJob("team-a", "mnist", 1).Obj())
				if err != nil {
					t.Fatal(err)
				}
				tmpls := templates(t, child)
				if len(tmpls) == 0 {
					t.Fatal("no pod templates")
				}
				for _, tmpl := range tmpls {
					if diff := cmp.Diff(tc.want, reporterOf(tmpl)); diff != "" {
						t.Errorf("reporter setup (-want +got):\n%s", diff)
					}
				}
			})
		}
	}
}
