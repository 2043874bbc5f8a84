package podsecurity

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"k8s.io/utils/ptr"
)

// PodSecurityContext is the pod-level context of every generated pod: a
// non-root user and the runtime's default seccomp profile. fsGroup makes
// mounted volumes writable by that user.
//
//nolint:revive // The name mirrors corev1.PodSecurityContext, the type it returns.
func PodSecurityContext(uid int64) *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To(uid),
		RunAsGroup:     ptr.To(uid),
		FSGroup:        ptr.To(uid),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// ContainerSecurityContext is the container-level context of every generated
// container: no privilege escalation, no capabilities and a read-only root
// filesystem (writable paths come from volumes).
func ContainerSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		ReadOnlyRootFilesystem:   ptr.To(true),
		RunAsNonRoot:             ptr.To(true),
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

var evaluator = mustEvaluator()

func mustEvaluator() policy.Evaluator {
	e, err := policy.NewEvaluator(policy.DefaultChecks())
	if err != nil {
		panic(err)
	}
	return e
}

// CheckRestricted returns an error naming every check of the "restricted"
// profile, at the latest policy version, that the pod fails.
func CheckRestricted(meta *metav1.ObjectMeta, spec *corev1.PodSpec) error {
	results := evaluator.EvaluatePod(api.LevelVersion{Level: api.LevelRestricted, Version: api.LatestVersion()}, meta, spec)
	var failed []string
	for _, r := range results {
		if !r.Allowed {
			failed = append(failed, fmt.Sprintf("%s (%s)", r.ForbiddenReason, r.ForbiddenDetail))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("pod violates the restricted Pod Security Standard: %s", strings.Join(failed, "; "))
	}
	return nil
}
