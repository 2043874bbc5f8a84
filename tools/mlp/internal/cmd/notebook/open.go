package notebook

import (
	"cmp"
	"context"
	"fmt"
	"net/url"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/cmd/util"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/escape"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/kube"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/watch"
)

// The Notebook operator's contract for its token Secret and Service.
const (
	notebookTokenKey  = "token"
	notebookPortName  = "http"
	notebookTokenName = "%s-token"
)

type openOptions struct {
	*util.Options
	util.OneName
	port    int
	browser bool
}

func newNotebookOpenCommand(o *util.Options) *cobra.Command {
	oo := &openOptions{Options: o}
	cmd := &cobra.Command{
		Use:   "open NAME",
		Short: "Port-forward to a Notebook and print the URL with its token; reconnects when the pod restarts",
		Long: `Forward a local port to the Notebook's Jupyter server through its Service,
read the access token from the Notebook's token Secret and print a URL that
works in a browser on this machine. The forward stays open until Ctrl-C and
follows the Notebook to a new pod when it restarts.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: util.CompleteNames(o, kube.NotebookKind),
		RunE:              util.RunE(oo),
	}
	cmd.Flags().IntVar(&oo.port, "port", 0, "Local port; 0 picks a free one")
	cmd.Flags().BoolVar(&oo.browser, "browser", false, "Open the URL in the default browser")
	return cmd
}

// Validate refuses a port that cannot be.
func (oo *openOptions) Validate() error {
	if oo.port < 0 || oo.port > 65535 {
		return fmt.Errorf("--port must be a port number from 0 (any free port) to 65535, not %d", oo.port)
	}
	return nil
}

// Run forwards to the Notebook's pod until Ctrl-C, reconnecting when the
// pod restarts.
func (oo *openOptions) Run(ctx context.Context) error {
	s, err := oo.Session(ctx)
	if err != nil {
		return err
	}
	name := oo.Name
	u, err := s.Get(ctx, kube.NotebookKind, name)
	if err != nil {
		return err
	}
	nb, err := kube.Typed[notebooksv1alpha1.Notebook](u)
	if err != nil {
		return err
	}
	if nb.Status.Phase == notebooksv1alpha1.PhaseCulled || nb.Status.Phase == notebooksv1alpha1.PhaseSuspended {
		return fmt.Errorf("the Notebook %q is %s: start it with `mlp notebook start %s`", name, nb.Status.Phase, name)
	}
	token, err := notebookToken(ctx, s, nb)
	if err != nil {
		return err
	}
	f := &forwarding{port: oo.port, token: token, nb: nb}
	for ctx.Err() == nil {
		pod, podPort, err := oo.waitForNotebookPod(ctx, s, name)
		if err != nil {
			select {
			case <-ctx.Done():
				return nil // Ctrl-C while the pod starts.
			default:
				return err
			}
		}
		ferr := oo.forwardOnce(ctx, s, f, pod, podPort)
		if apierrors.IsForbidden(ferr) {
			return ferr // Reconnecting cannot help.
		}
		if ctx.Err() == nil {
			fmt.Fprintf(oo.Streams.ErrOut, "lost the connection to pod %s (%s); reconnecting\n", pod.Name, escape.Line(fmt.Sprint(ferr)))
			_ = watch.Sleep(ctx, oo.PollInterval)
		}
	}
	// Ctrl-C is how the user ends the forward: not an error.
	return nil
}

// forwarding is the state of one `notebook open` across reconnects: the
// local port stays the same, so the printed URL keeps working.
type forwarding struct {
	port      int
	announced bool
	token     string
	nb        *notebooksv1alpha1.Notebook
}

// forwardOnce forwards to one pod until that connection ends.
func (oo *openOptions) forwardOnce(ctx context.Context, s *kube.Session, f *forwarding, pod *corev1.Pod, podPort int) error {
	ready := make(chan int, 1)
	done := make(chan error, 1)
	go func() { done <- oo.Forward(ctx, s, pod, f.port, podPort, ready) }()
	select {
	case err := <-done:
		return err
	case f.port = <-ready:
	}
	if !f.announced {
		oo.announce(f.nb, f.port, f.token)
		f.announced = true
	} else {
		fmt.Fprintf(oo.Streams.ErrOut, "reconnected to pod %s\n", pod.Name)
	}
	return <-done
}

func (oo *openOptions) announce(nb *notebooksv1alpha1.Notebook, port int, token string) {
	link := fmt.Sprintf("http://127.0.0.1:%d/notebook/%s/%s/?token=%s", port, nb.Namespace, nb.Name, url.QueryEscape(token))
	fmt.Fprintf(oo.Streams.Out, "Notebook %s is at %s\n", nb.Name, link)
	fmt.Fprintln(oo.Streams.ErrOut, "Forwarding; press Ctrl-C to stop.")
	if oo.browser {
		if err := oo.Browser(link); err != nil {
			fmt.Fprintf(oo.Streams.ErrOut, "could not open a browser (%v): open the URL above yourself\n", err)
		}
	}
}

func notebookToken(ctx context.Context, s *kube.Session, nb *notebooksv1alpha1.Notebook) (string, error) {
	name := cmp.Or(nb.Status.TokenSecretName, fmt.Sprintf(notebookTokenName, nb.Name))
	var secret corev1.Secret
	if err := s.C.Get(ctx, kube.Key(s.Namespace, name), &secret); err != nil {
		return "", kube.ExplainCore(err, "secrets", "get", name, s.Namespace)
	}
	token := string(secret.Data[notebookTokenKey])
	if token == "" {
		return "", fmt.Errorf("secret %q of Notebook %q has no %q key yet", name, nb.Name, notebookTokenKey)
	}
	return token, nil
}

// waitForNotebookPod finds the ready pod behind the Notebook's Service (by
// the Service's own selector) and the container port its "http" port
// targets, waiting while the pod (re)starts.
func (oo *openOptions) waitForNotebookPod(ctx context.Context, s *kube.Session, name string) (*corev1.Pod, int, error) {
	waiting := false
	for {
		var svc corev1.Service
		if err := s.C.Get(ctx, kube.Key(s.Namespace, name), &svc); err != nil {
			return nil, 0, kube.ExplainCore(err, "services", "get", name, s.Namespace)
		}
		var pods corev1.PodList
		if err := s.C.List(ctx, &pods, client.InNamespace(s.Namespace), client.MatchingLabelsSelector{Selector: labels.SelectorFromSet(svc.Spec.Selector)}); err != nil {
			return nil, 0, kube.ExplainCore(err, "pods", "list", "", s.Namespace)
		}
		if pod := notebookPod(pods.Items); pod != nil {
			if port := containerPort(pod, notebookPortName); port > 0 {
				return pod, port, nil
			}
		}
		if !waiting {
			fmt.Fprintf(oo.Streams.ErrOut, "waiting for the pod of Notebook %q to be ready\n", name)
			waiting = true
		}
		if err := watch.Sleep(ctx, oo.PollInterval); err != nil {
			return nil, 0, err
		}
	}
}

func containerPort(pod *corev1.Pod, name string) int {
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == name {
				return int(p.ContainerPort)
			}
		}
	}
	return 0
}
