package render

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/config"
	"github.com/ml-platform/ml-platform/shared/accelerator"
	"github.com/ml-platform/ml-platform/shared/featureref"
	"github.com/ml-platform/ml-platform/shared/podsecurity"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func testConfig() config.Config {
	cfg := config.Default()
	cfg.NetworkPolicy.OperatorNamespace = "mlp-system"
	cfg.NetworkPolicy.OperatorPodLabels = map[string]string{"app.kubernetes.io/name": "notebook-operator"}
	cfg.NetworkPolicy.IngressFrom = []networkingv1.NetworkPolicyPeer{{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "ingress-nginx"}},
	}}
	return cfg
}

// minimal is a Notebook as the API server stores it after defaulting.
func minimal() *notebooksv1alpha1.Notebook {
	return &notebooksv1alpha1.Notebook{
		ObjectMeta: metav1.ObjectMeta{Name: "nb", Namespace: "team", UID: "0f8c6e2a-1111-2222-3333-444455556666"},
		Spec: notebooksv1alpha1.NotebookSpec{
			Workspace: notebooksv1alpha1.Workspace{Size: ptr.To(resource.MustParse("10Gi")), MountPath: "/home/jovyan", DeletionPolicy: commonv1alpha1.DeletionPolicyRetain},
		},
	}
}

func full() *notebooksv1alpha1.Notebook {
	nb := minimal()
	nb.Name = "gpu-nb"
	nb.Spec.Image = "registry.example.com/jupyter/pytorch:1.0"
	nb.Spec.Resources = commonv1alpha1.Resources{
		ResourceRequirements: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("8Gi")},
		},
		Accelerators: &commonv1alpha1.Accelerators{Count: 1, Type: "a100"},
	}
	nb.Spec.Env = []corev1.EnvVar{{Name: "MLFLOW_TRACKING_URI", Value: "http://mlflow.team"}}
	nb.Spec.Volumes = []corev1.Volume{{Name: "datasets", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "datasets", ReadOnly: true}}}}
	nb.Spec.VolumeMounts = []corev1.VolumeMount{{Name: "datasets", MountPath: "/data", ReadOnly: true}}
	nb.Spec.PodTemplate = &notebooksv1alpha1.PodTemplate{
		Tolerations:        []corev1.Toleration{{Key: "team", Operator: corev1.TolerationOpEqual, Value: "ml", Effect: corev1.TaintEffectNoSchedule}},
		NodeSelector:       map[string]string{"topology.kubernetes.io/zone": "z1"},
		ServiceAccountName: "notebook-runner",
		PriorityClassName:  "interactive",
		ImagePullSecrets:   []corev1.LocalObjectReference{{Name: "registry"}},
	}
	nb.Spec.Workspace = notebooksv1alpha1.Workspace{Size: ptr.To(resource.MustParse("50Gi")), StorageClassName: ptr.To("fast"), MountPath: "/home/jovyan", DeletionPolicy: commonv1alpha1.DeletionPolicyDelete}
	nb.Spec.QueueName = "gpu-queue"
	nb.Spec.Access = &notebooksv1alpha1.Access{AllowFrom: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "dashboard"}}}}}
	return nb
}

func fullInput() Input {
	cfg := testConfig()
	cfg.Ingress = config.Ingress{Enabled: true, ClassName: "nginx", Host: "notebooks.example.com", TLSSecretName: "notebooks-tls"}
	return Input{
		Notebook: full(),
		Config:   cfg,
		Accelerator: &accelerator.Class{
			Type: "a100", ResourceName: "nvidia.com/gpu",
			NodeSelector: map[string]string{"nvidia.com/gpu.product": "A100"},
			Tolerations:  []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		},
		Stores: []featureref.Store{{Name: "features", SecretName: "features-client", Key: "feature_store.yaml"}},
	}
}

func renderAll(in Input) []any {
	objs := []any{
		StatefulSet(in, StatefulSetState{Replicas: 1, Annotations: map[string]string{AnnotationStartedAt: "2026-01-02T09:00:00Z"}}),
		Service(in),
		TokenSecret(in.Notebook, "not-a-real-token"),
		WorkspaceClaim(in, WorkspaceSize(in.Notebook)),
	}
	if np := NetworkPolicy(in); np != nil {
		objs = append(objs, np)
	}
	if ing := Ingress(in); ing != nil {
		objs = append(objs, ing)
	}
	return objs
}

// TestGolden pins every generated object. A diff in the StatefulSet's pod
// template means that upgrading the operator restarts every running
// notebook: such a change needs a deliberate reason.
func TestGolden(t *testing.T) {
	for name, in := range map[string]Input{
		"minimal": {Notebook: minimal(), Config: testConfig()},
		"full":    fullInput(),
	} {
		t.Run(name, func(t *testing.T) {
			var docs []string
			for _, o := range renderAll(in) {
				data, err := yaml.Marshal(o)
				if err != nil {
					t.Fatal(err)
				}
				docs = append(docs, string(data))
			}
			got := strings.Join(docs, "---\n")
			path := filepath.Join("testdata", name+".golden.yaml")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./internal/render -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("generated objects differ from %s (-want +got); run with -update only if the change is intended:\n%s", path, diff)
			}
		})
	}
}

func TestPodSatisfiesRestricted(t *testing.T) {
	for name, in := range map[string]Input{
		"minimal": {Notebook: minimal(), Config: testConfig()},
		"full":    fullInput(),
	} {
		t.Run(name, func(t *testing.T) {
			tpl := PodTemplate(in)
			if err := podsecurity.CheckRestricted(&tpl.ObjectMeta, &tpl.Spec); err != nil {
				t.Fatal(err)
			}
		})
	}
	// The check is real: a user volume of a forbidden type fails it.
	in := Input{Notebook: minimal(), Config: testConfig()}
	in.Notebook.Spec.Volumes = []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
	tpl := PodTemplate(in)
	if err := podsecurity.CheckRestricted(&tpl.ObjectMeta, &tpl.Spec); err == nil {
		t.Fatal("a hostPath volume passed the restricted check")
	}
}

func TestTokenNeverInArguments(t *testing.T) {
	tpl := PodTemplate(fullInput())
	c := tpl.Spec.Containers[0]
	if len(c.Args) > 0 || len(c.Command) > 0 {
		t.Errorf("container has command %v args %v; the token must come from the environment only", c.Command, c.Args)
	}
	var fromSecret bool
	for _, e := range c.Env {
		if e.Name == "JUPYTER_TOKEN" {
			fromSecret = e.Value == "" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == "gpu-nb-token"
		}
	}
	if !fromSecret {
		t.Error("JUPYTER_TOKEN is not taken from the token Secret")
	}
}

func TestWorkspaceOwnershipFollowsDeletionPolicy(t *testing.T) {
	for name, tc := range map[string]struct {
		policy    commonv1alpha1.DeletionPolicy
		wantOwned bool
	}{
		"Retain outlives the Notebook": {policy: commonv1alpha1.DeletionPolicyRetain},
		"Delete is collected with it":  {policy: commonv1alpha1.DeletionPolicyDelete, wantOwned: true},
	} {
		t.Run(name, func(t *testing.T) {
			nb := minimal()
			nb.Spec.Workspace.DeletionPolicy = tc.policy
			pvc := WorkspaceClaim(Input{Notebook: nb, Config: testConfig()}, WorkspaceSize(nb))
			if got := len(pvc.OwnerReferences) == 1; got != tc.wantOwned {
				t.Errorf("owner references %v, want owned=%v", pvc.OwnerReferences, tc.wantOwned)
			}
		})
	}
}

func TestTemplateHashIgnoresReplicas(t *testing.T) {
	in := Input{Notebook: minimal(), Config: testConfig()}
	a := StatefulSet(in, StatefulSetState{Replicas: 1})
	c := StatefulSet(in, StatefulSetState{Replicas: 0})
	if a.Annotations[AnnotationTemplateHash] != c.Annotations[AnnotationTemplateHash] {
		t.Error("a replica change changed the template hash")
	}
}

// TestNetworkPolicyEgress: with egress on, the Notebook's policy adds the
// Egress type and exactly three kinds of destination: the cluster's DNS
// on port 53, the managed servers of the FeatureStores the Notebook
// references (pods of its own namespace) and the platform's own rules;
// spec.access.allowFrom stays an ingress source. Ingress off keeps the
// egress rules alone, and both off renders no policy.
func TestNetworkPolicyEgress(t *testing.T) {
	mirror := networkingv1.NetworkPolicyEgressRule{
		To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.20.0.0/16"}}},
		Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(443))}},
	}
	dns := networkingv1.NetworkPolicyEgressRule{
		To: []networkingv1.NetworkPolicyPeer{{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "kube-system"}},
			PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "kube-dns"}},
		}},
		Ports: []networkingv1.NetworkPolicyPort{
			{Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To(intstr.FromInt32(53))},
			{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(53))},
		},
	}
	nb := full()
	nb.Spec.FeatureStores = []commonv1alpha1.FeatureStoreReference{{LocalObjectReference: commonv1alpha1.LocalObjectReference{Name: "sales"}}}
	stores := *featureref.ServerEgress(nb.Spec.FeatureStores)

	for name, tc := range map[string]struct {
		ingress, egress bool
		nb              *notebooksv1alpha1.Notebook
		wantTypes       []networkingv1.PolicyType
		wantEgress      []networkingv1.NetworkPolicyEgressRule
	}{
		"egress off": {ingress: true, nb: nb, wantTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
		"both": {ingress: true, egress: true, nb: nb,
			wantTypes:  []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			wantEgress: []networkingv1.NetworkPolicyEgressRule{dns, stores, mirror}},
		"no FeatureStore": {ingress: true, egress: true, nb: minimal(),
			wantTypes:  []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			wantEgress: []networkingv1.NetworkPolicyEgressRule{dns, mirror}},
		"egress only": {egress: true, nb: nb,
			wantTypes:  []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			wantEgress: []networkingv1.NetworkPolicyEgressRule{dns, stores, mirror}},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := testConfig()
			cfg.NetworkPolicy.Enabled = tc.ingress
			cfg.NetworkPolicy.Egress.Enabled = tc.egress
			cfg.NetworkPolicy.Egress.To = []networkingv1.NetworkPolicyEgressRule{mirror}
			np := NetworkPolicy(Input{Notebook: tc.nb, Config: cfg})
			if !cmp.Equal(tc.wantTypes, np.Spec.PolicyTypes) {
				t.Errorf("policy types %v, want %v", np.Spec.PolicyTypes, tc.wantTypes)
			}
			if diff := cmp.Diff(tc.wantEgress, np.Spec.Egress); diff != "" {
				t.Errorf("egress rules (-want +got):\n%s", diff)
			}
			if tc.ingress != (len(np.Spec.Ingress) == 1) {
				t.Errorf("ingress rules %+v with ingress %t", np.Spec.Ingress, tc.ingress)
			}
		})
	}
	cfg := testConfig()
	cfg.NetworkPolicy.Enabled = false
	if np := NetworkPolicy(Input{Notebook: nb, Config: cfg}); np != nil {
		t.Errorf("both off rendered %+v", np)
	}
}

// A reference no FeatureStore can answer (stored before the API capped its
// length) must not make the whole policy invalid: every label value the
// policy selects on is one the API server accepts.
func TestNetworkPolicyLabelValuesAreValidForAnyReference(t *testing.T) {
	nb := full()
	nb.Spec.FeatureStores = []commonv1alpha1.FeatureStoreReference{
		{LocalObjectReference: commonv1alpha1.LocalObjectReference{Name: strings.Repeat("s", 70)}},
		{LocalObjectReference: commonv1alpha1.LocalObjectReference{Name: "sales"}},
	}
	cfg := testConfig()
	cfg.NetworkPolicy.Egress.Enabled = true
	np := NetworkPolicy(Input{Notebook: nb, Config: cfg})
	var selectors []*metav1.LabelSelector
	for _, r := range np.Spec.Egress {
		for _, p := range r.To {
			selectors = append(selectors, p.PodSelector, p.NamespaceSelector)
		}
	}
	for _, r := range np.Spec.Ingress {
		for _, p := range r.From {
			selectors = append(selectors, p.PodSelector, p.NamespaceSelector)
		}
	}
	sales := false
	for _, sel := range selectors {
		if sel == nil {
			continue
		}
		for k, v := range sel.MatchLabels {
			if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
				t.Errorf("matchLabels %s=%q: %v", k, v, errs)
			}
			sales = sales || (k == featureref.LabelStore && v == "sales")
		}
	}
	if !sales {
		t.Errorf("the valid reference lost its peer: %+v", np.Spec.Egress)
	}
}
