package progress

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
)

// The environment of a training container that may report progress.
const (
	// EnvURL is the full report URL of the pod's TrainingJob.
	EnvURL = "MLPLATFORM_PROGRESS_URL"
	// EnvTokenFile is the projected token to send as a bearer token; the
	// kubelet renews it.
	EnvTokenFile = "MLPLATFORM_PROGRESS_TOKEN_FILE"
	// EnvCA is the PEM of the CA that signed the endpoint's certificate.
	EnvCA = "MLPLATFORM_PROGRESS_CA"
	// EnvJob is the TrainingJob's name.
	EnvJob = "MLPLATFORM_TRAININGJOB"
)

// The projected token's volume and where the training container sees it,
// within the names and paths the CRD reserves (trainingv1alpha1.PodTemplatePatch;
// the validation tests check them against the CRD).
const (
	TokenVolume    = "mlplatform-progress-token"
	TokenDir       = "/var/run/secrets/mlplatform.dev/progress"
	tokenPath      = "token"
	tokenLifetime  = int64(3600)
	maxCAEnvLength = 16 << 10
)

// Endpoint is what training pods need to report: the endpoint's URL
// through the operator's Service and its CA. Setup makes it.
type Endpoint struct {
	URL string
	// CA is the PEM of the endpoint's CA as last loaded from its Secret,
	// so that pods created after a rotation trust the new one.
	CA func() string
}

// Inject gives the training container (the first) of a TrainingJob's pod
// template a projected ServiceAccount token for the endpoint's audience and
// the environment to find the endpoint. Both backends call it through
// backend.PodTemplate. A nil Endpoint injects nothing.
func (e *Endpoint) Inject(spec *corev1.PodSpec, tj *trainingv1alpha1.TrainingJob) {
	if e == nil || len(spec.Containers) == 0 {
		return
	}
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: TokenVolume, VolumeSource: corev1.VolumeSource{
		Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{
			ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: Audience, ExpirationSeconds: ptr.To(tokenLifetime), Path: tokenPath},
		}}},
	}})
	c := &spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: TokenVolume, MountPath: TokenDir, ReadOnly: true})
	c.Env = append(c.Env,
		corev1.EnvVar{Name: EnvURL, Value: fmt.Sprintf("%s/v1/namespaces/%s/trainingjobs/%s/progress", e.URL, tj.Namespace, tj.Name)},
		corev1.EnvVar{Name: EnvTokenFile, Value: TokenDir + "/" + tokenPath},
		corev1.EnvVar{Name: EnvCA, Value: e.CA()},
		corev1.EnvVar{Name: EnvJob, Value: tj.Name},
	)
}
