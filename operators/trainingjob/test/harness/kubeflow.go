package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ml-platform/ml-platform/shared/testenv"
)

// The names the Kubeflow training-operator v1.8.1 hard-codes or defaults.
const (
	KubeflowNamespace = "kubeflow"
	kubeflowSecret    = "training-operator-webhook-cert"
	kubeflowVWC       = "validator.training-operator.kubeflow.org"
	// kubeflowCertDir is fixed in its pkg/cert; in a cluster the Secret is
	// mounted there.
	kubeflowCertDir = "/tmp/k8s-webhook-server/serving-certs"
)

// KubeflowBinary builds (once, cached) and returns the training-operator
// binary pinned in tools/kubeflow.
func KubeflowBinary(repoRoot string) (string, error) {
	return runScript(filepath.Join(repoRoot, "operators", "trainingjob", "hack", "kubeflow-bin.sh"), "building the Kubeflow training-operator")
}

func runScript(path, what string) (string, error) {
	out, err := exec.Command(path).Output()
	if err != nil {
		return "", fmt.Errorf("%s: %w: %s", what, err, stderrOf(err))
	}
	return string(trimNewline(out)), nil
}

func stderrOf(err error) []byte {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.Stderr
	}
	return nil
}

func trimNewline(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// Kubeflow is the Kubeflow training-operator running as a process outside
// any cluster.
type Kubeflow struct {
	binary, kubeconfig, logPath string
	args                        []string // besides those set here
	process                     *testenv.Process
	logFile                     *os.File
}

// StartKubeflow runs the binary against the API server behind admin (a
// cluster administrator's config), with args besides the defaults set
// here, until its controllers run.
//
// Out of cluster it needs what its Deployment would have: the kubeflow
// namespace, its webhook Secret (its certificate rotator fills it), the
// ValidatingWebhookConfiguration the rotator injects the CA into, and the
// Secret's certificate in its fixed certificate folder; it starts its
// controllers only once that folder holds the certificate, so it is
// started twice. Its webhooks are never called: the certificate names the
// in-cluster Service, and the configuration here matches no kind in use
// and ignores failures, so jobs are admitted without its validation.
func StartKubeflow(ctx context.Context, admin *rest.Config, c client.Client, binary, workDir string, args ...string) (*Kubeflow, error) {
	k := &Kubeflow{binary: binary, args: args, kubeconfig: filepath.Join(workDir, "kubeflow.kubeconfig"), logPath: filepath.Join(workDir, "training-operator.log")}
	if err := testenv.WriteKubeconfig(admin, k.kubeconfig); err != nil {
		return nil, err
	}
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: KubeflowNamespace}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: KubeflowNamespace, Name: kubeflowSecret}},
		webhookConfiguration(),
	} {
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
	}
	if err := k.start(); err != nil {
		return nil, err
	}
	secret := &corev1.Secret{}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Namespace: KubeflowNamespace, Name: kubeflowSecret}, secret); err != nil {
			return false, err
		}
		return len(secret.Data["tls.crt"]) > 0 && len(secret.Data["tls.key"]) > 0, nil
	})
	if err != nil {
		_ = k.Stop()
		return nil, fmt.Errorf("waiting for the training-operator's certificate (log %s): %w", k.logPath, err)
	}
	if err := k.Stop(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(kubeflowCertDir, 0o700); err != nil {
		return nil, err
	}
	for _, key := range []string{"tls.crt", "tls.key"} {
		if err := os.WriteFile(filepath.Join(kubeflowCertDir, key), secret.Data[key], 0o600); err != nil {
			return nil, err
		}
	}
	if err := k.start(); err != nil {
		return nil, err
	}
	return k, nil
}

func (k *Kubeflow) start() error {
	logFile, err := os.OpenFile(k.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	k.process, err = testenv.StartProcess(testenv.ProcessOptions{
		Name: "the Kubeflow training-operator",
		Command: func(port int) (*exec.Cmd, error) {
			cmd := exec.Command(k.binary, append([]string{
				"--metrics-bind-address=0",
				"--health-probe-bind-address=0",
				"--webhook-server-port=" + strconv.Itoa(port),
				"--enable-scheme=pytorchjob", "--enable-scheme=tfjob", "--enable-scheme=xgboostjob", "--enable-scheme=paddlejob", "--enable-scheme=mpijob",
			}, k.args...)...)
			// KUBEFLOW_NAMESPACE stays unset: it would restrict the operator
			// to that one namespace.
			cmd.Env = append(os.Environ(), "KUBECONFIG="+k.kubeconfig)
			return cmd, nil
		},
		// Its webhook server listens only once it has its certificate,
		// which the first of its two starts is for.
		NoWait:     true,
		StopSignal: syscall.SIGINT,
		Log:        logFile,
	})
	if err != nil {
		_ = logFile.Close()
		return err
	}
	k.logFile = logFile
	return nil
}

// Stop ends the process.
func (k *Kubeflow) Stop() error {
	if k.process == nil {
		return nil
	}
	err := k.process.Stop()
	_ = k.logFile.Close()
	k.process = nil
	return err
}

// LogPath is the process's log file.
func (k *Kubeflow) LogPath() string { return k.logPath }

func webhookConfiguration() *admissionregistrationv1.ValidatingWebhookConfiguration {
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: kubeflowVWC},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "validator.mxjob.training-operator.kubeflow.org",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
				Namespace: KubeflowNamespace, Name: "training-operator", Path: ptr.To("/validate-kubeflow-org-v1-mxjob"),
			}},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{"kubeflow.org"}, APIVersions: []string{"v1"}, Resources: []string{"mxjobs"}},
			}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
}
