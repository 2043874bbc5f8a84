package util

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/ml-platform/ml-platform/tools/mlp/internal/escape"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/kube"
)

// Exit codes of mlp. A waiting command that stops before the outcome
// (timeout, interrupt) exits with ExitIncomplete so scripts can tell "the job
// failed" from "I stopped watching".
const (
	ExitOK         = 0
	ExitFailed     = 1
	ExitIncomplete = 2
)

// Options are what every command shares: the IO streams, the kubeconfig
// flags and the session they open, and the dependencies tests replace (the
// clock, the terminal detection and the parts of Kubernetes a test
// apiserver does not have: a kubelet for logs and port-forwarding). Each
// command embeds them in its own options type (see Runnable).
type Options struct {
	Streams     genericiooptions.IOStreams
	ConfigFlags *genericclioptions.ConfigFlags

	// Now is the clock for ages and ETAs.
	Now func() time.Time
	// Terminal reports whether w is an interactive terminal, which gets a
	// progress bar instead of one line per change.
	Terminal func(w io.Writer) bool
	// Width is the number of columns of the terminal w, 0 when unknown.
	Width func(w io.Writer) int
	// PollInterval is how often waiting commands read the job again.
	PollInterval time.Duration
	// Logs opens a container's log stream.
	Logs LogOpener
	// Forward port-forwards to a pod until the connection ends.
	Forward Forwarder
	// Browser opens a URL in the user's browser.
	Browser func(url string) error
	// Version is the client's version.
	Version string
	// ConnectTimeout bounds the first contact with the cluster unless
	// --request-timeout is given.
	ConnectTimeout time.Duration
}

// ExitError ends a command with an exit code other than ExitFailed, or
// with ExitFailed and nothing more to print (Err nil: the command printed
// why).
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit code %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// Session opens the session with the cluster the kubeconfig flags chose.
func (o *Options) Session(ctx context.Context) (*kube.Session, error) {
	return kube.NewSession(ctx, o.ConfigFlags, o.ConnectTimeout)
}

// DefaultOptions are the options of the real binary.
func DefaultOptions(streams genericiooptions.IOStreams) *Options {
	flags := genericclioptions.NewConfigFlags(true)
	// Warnings and throttling messages of client-go go to stderr; request
	// dumps are never enabled, so tokens do not reach the terminal.
	return &Options{
		Streams:      streams,
		ConfigFlags:  flags,
		Now:          time.Now,
		Terminal:     IsTerminal,
		Width:        terminalWidth,
		PollInterval: time.Second,
		Logs:         APILogs,
		Forward:      PortForward,
		Browser:      OpenBrowser,
		Version:      ClientVersion(),

		ConnectTimeout: kube.DefaultConnectTimeout,
	}
}

// IsTerminal says whether w is an interactive terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func terminalWidth(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok {
		return 0
	}
	width, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return 0
	}
	return width
}

// Execute runs one command line of the command tree root and returns its
// exit code. Errors are printed once, as "error: ..." on stderr, in words a
// user can act on; they often quote the cluster (a condition's message, a
// webhook's refusal), so they are escaped, keeping their lines.
func Execute(ctx context.Context, o *Options, root *cobra.Command, args []string) int {
	cmd := root
	cmd.SetArgs(args)
	cmd.SetIn(o.Streams.In)
	cmd.SetOut(o.Streams.Out)
	cmd.SetErr(o.Streams.ErrOut)
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		if ee.Err != nil {
			fmt.Fprintln(o.Streams.ErrOut, "error:", escape.Text(ee.Err.Error()))
		}
		return ee.Code
	}
	fmt.Fprintln(o.Streams.ErrOut, "error:", escape.Text(err.Error()))
	return ExitFailed
}

// NewRoot is the mlp command without its command groups: the kubeconfig
// flags and their completions, and the name it is called by.
func NewRoot(o *Options) *cobra.Command {
	root := &cobra.Command{
		Use:   "mlp",
		Short: "Train models, open notebooks and use feature stores on ml-platform",
		Long: `mlp is the command-line tool of ml-platform. It works on the TrainingJob,
Notebook and FeatureStore resources of your current kubeconfig context and
namespace, and also runs as the kubectl plugin "kubectl mlp".`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// Run as kubectl-mlp, the help and completion scripts say "kubectl mlp".
	if strings.HasPrefix(filepath.Base(os.Args[0]), "kubectl-") {
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl mlp"}
	}
	o.ConfigFlags.AddFlags(root.PersistentFlags())
	registerConfigFlagCompletions(root, o)
	return root
}
