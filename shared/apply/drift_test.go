package apply

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// desired is a StatefulSet as the operator renders it: no type defaults,
// no status.
func desired() *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "nb", Namespace: "team",
			Labels:      map[string]string{"app.kubernetes.io/managed-by": "notebook-operator"},
			Annotations: map[string]string{"notebooks.mlplatform.dev/applied-hash": "abc"},
		},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"notebooks.mlplatform.dev/name": "nb"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"notebooks.mlplatform.dev/name": "nb"}},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name: "notebook", Image: "jupyter:1",
						Env:       []corev1.EnvVar{{Name: "NB_PREFIX", Value: "/notebook/team/nb/"}},
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.5")}},
					}},
					Volumes: []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
				},
			},
		},
	}
}

func TestFind(t *testing.T) {
	for name, tc := range map[string]struct {
		live     func(*appsv1.StatefulSet)
		wantPath string
	}{
		"unchanged": {live: func(*appsv1.StatefulSet) {}},
		"as read from the cache: no type, server fields and defaults": {
			live: func(s *appsv1.StatefulSet) {
				s.TypeMeta = metav1.TypeMeta{}
				s.UID, s.ResourceVersion, s.Generation = "u", "42", 3
				s.CreationTimestamp = metav1.Now()
				s.Spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement
				s.Spec.RevisionHistoryLimit = ptr.To[int32](10)
				c := &s.Spec.Template.Spec.Containers[0]
				c.ImagePullPolicy, c.TerminationMessagePath = corev1.PullIfNotPresent, "/dev/termination-log"
				s.Spec.Template.Spec.DNSPolicy = corev1.DNSClusterFirst
				s.Status.ReadyReplicas = 1
			},
		},
		"the same quantity written differently": {
			live: func(s *appsv1.StatefulSet) {
				s.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("500m")
			},
		},
		"tolerations and a nodeSelector injected by Kueue": {
			live: func(s *appsv1.StatefulSet) {
				s.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}
				s.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "gpu"}
			},
		},
		"another actor's env entry, label and annotation": {
			live: func(s *appsv1.StatefulSet) {
				c := &s.Spec.Template.Spec.Containers[0]
				c.Env = append([]corev1.EnvVar{{Name: "HTTP_PROXY", Value: "http://proxy"}}, c.Env...)
				s.Labels["team"] = "a"
				s.Annotations["note"] = "b"
			},
		},
		"a sidecar container added": {
			live: func(s *appsv1.StatefulSet) {
				s.Spec.Template.Spec.Containers = append(s.Spec.Template.Spec.Containers, corev1.Container{Name: "proxy", Image: "envoy"})
			},
		},
		"the image changed": {
			live:     func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = "jupyter:evil" },
			wantPath: "spec.template.spec.containers[name=notebook]",
		},
		"scaled by hand": {
			live:     func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr.To[int32](0) },
			wantPath: "spec.replicas",
		},
		"our env entry changed": {
			live:     func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.Containers[0].Env[0].Value = "/" },
			wantPath: "spec.template.spec.containers[name=notebook]",
		},
		"our label removed": {
			live:     func(s *appsv1.StatefulSet) { delete(s.Labels, "app.kubernetes.io/managed-by") },
			wantPath: "metadata.labels", // its only label: the map is gone
		},
		"our annotation changed": {
			live:     func(s *appsv1.StatefulSet) { s.Annotations["notebooks.mlplatform.dev/applied-hash"] = "old" },
			wantPath: "metadata.annotations.notebooks.mlplatform.dev/applied-hash",
		},
		"an empty volume source replaced": {
			live: func(s *appsv1.StatefulSet) {
				s.Spec.Template.Spec.Volumes[0].VolumeSource = corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}
			},
			wantPath: "spec.template.spec.volumes[name=tmp]",
		},
	} {
		t.Run(name, func(t *testing.T) {
			live := desired()
			tc.live(live)
			got, err := Drift(desired(), live)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.wantPath {
				t.Errorf("Drift = %q, want %q", got, tc.wantPath)
			}
		})
	}
}

// TestDriftOnExactPaths: a NetworkPolicy's rules are an atomic list whose
// extra elements (a rule that admits everyone) or extra fields (a peer
// widened to every namespace) admit more; on an exact path they are drift,
// elsewhere what another actor added never is.
func TestDriftOnExactPaths(t *testing.T) {
	peer := func() networkingv1.NetworkPolicyPeer {
		return networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"job": "j"}}}
	}
	policy := func() *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "j-ranks", Namespace: "team"},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"job": "j"}},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
				Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{peer()}}},
			},
		}
	}
	exact := []string{"spec.ingress", "spec.policyTypes"}
	for name, tc := range map[string]struct {
		live             func(*networkingv1.NetworkPolicy)
		lenient, onExact string
	}{
		"unchanged": {live: func(*networkingv1.NetworkPolicy) {}},
		"a rule that admits everyone appended": {
			live: func(p *networkingv1.NetworkPolicy) {
				p.Spec.Ingress = append(p.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{})
			},
			onExact: "spec.ingress",
		},
		"the peer widened to every namespace": {
			live: func(p *networkingv1.NetworkPolicy) {
				p.Spec.Ingress[0].From[0].NamespaceSelector = &metav1.LabelSelector{}
			},
			onExact: "spec.ingress",
		},
		"egress added to the policy types": {
			live: func(p *networkingv1.NetworkPolicy) {
				p.Spec.PolicyTypes = append(p.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
			},
			onExact: "spec.policyTypes",
		},
		"a rule changed": {
			live: func(p *networkingv1.NetworkPolicy) {
				p.Spec.Ingress[0].From[0].PodSelector.MatchLabels["job"] = "other"
			},
			lenient: "spec.ingress[0]", onExact: "spec.ingress",
		},
		"a label added to the policy": {
			live: func(p *networkingv1.NetworkPolicy) { p.Labels = map[string]string{"team": "a"} },
		},
	} {
		t.Run(name, func(t *testing.T) {
			live := policy()
			tc.live(live)
			for _, c := range []struct {
				exact []string
				want  string
			}{{nil, tc.lenient}, {exact, tc.onExact}} {
				got, err := Drift(policy(), live, c.exact...)
				if err != nil {
					t.Fatal(err)
				}
				if got != c.want {
					t.Errorf("Drift(exact %v) = %q, want %q", c.exact, got, c.want)
				}
			}
		})
	}
}
