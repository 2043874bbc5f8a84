package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
)

type submitOptions struct {
	*Options

	file          string
	framework     string
	image         string
	workers       int32
	resources     resourceFlags
	env           []string
	checkpoint    string
	queue         string
	featureStores []string
	backend       string
	dryRun        string
	print         *printFlags
	noWait        bool
	timeout       time.Duration

	// Completed from the command line: the NAME, the command after --,
	// and the flags that shape a job (which -f excludes).
	names, command []string
	shaping        []string
}

func newSubmitCommand(o *Options) *cobra.Command {
	so := &submitOptions{Options: o, print: newPrintFlags()}
	cmd := &cobra.Command{
		Use:   "submit [NAME] [-- COMMAND [ARG...]]",
		Short: "Create a TrainingJob from a file or from flags, and follow it to the end",
		Long: `Create a TrainingJob from a file (-f) or from flags, then wait for it and show
its progress: queued or admitted, pods ready, run and restarts, and the
training's own progress. The exit code is 0 when it succeeded, 1 when it
failed (with the reason and the last lines of the failing pod's log) and 2
when the wait ended first (--timeout or Ctrl-C): the job keeps running.`,
		Example: `  mlp train submit mnist --image registry.example/mnist:1 --workers 2 --gpus 1 -- python train.py --epochs 3
  mlp train submit -f trainingjob.yaml --no-wait
  mlp train submit mnist --image registry.example/mnist:1 --dry-run=server -o yaml`,
		RunE: runE(so),
	}
	f := cmd.Flags()
	f.StringVarP(&so.file, "filename", "f", "", "File with a TrainingJob (YAML or JSON; - for stdin)")
	f.StringVar(&so.framework, "framework", string(trainingv1alpha1.FrameworkPyTorch), "Framework: pytorch, tensorflow, xgboost, paddle or jax (jax on the native backend only)")
	f.StringVar(&so.image, "image", "", "Image of the training container")
	f.Int32Var(&so.workers, "workers", 1, "Pods taking part in the training, rank 0 included")
	so.resources.addFlags(f, " per pod")
	f.StringArrayVarP(&so.env, "env", "e", nil, "Environment variable NAME=VALUE (repeatable)")
	f.StringVar(&so.checkpoint, "checkpoint-size", "", "Size of a checkpoint volume the operator creates, e.g. 10Gi")
	f.StringVar(&so.queue, "queue", "", "Kueue LocalQueue to submit to")
	f.StringArrayVar(&so.featureStores, "feature-store", nil, "FeatureStore whose client configuration is mounted (repeatable)")
	_ = cmd.RegisterFlagCompletionFunc("feature-store", completeNames(o, featureStoreKind))
	f.StringVar(&so.backend, "backend", "", "Training backend (native or kubeflow); empty for the platform's default")
	f.StringVar(&so.dryRun, "dry-run", "none", "none, client (print what would be sent) or server (validated and defaulted by the API server, nothing created)")
	f.Lookup("dry-run").NoOptDefVal = "client"
	_ = cmd.RegisterFlagCompletionFunc("framework", fixed(frameworks))
	_ = cmd.RegisterFlagCompletionFunc("backend", fixed(backends))
	_ = cmd.RegisterFlagCompletionFunc("dry-run", fixed([]string{"none", "client", "server"}))
	so.print.addFlags(cmd, false)
	f.BoolVar(&so.noWait, "no-wait", false, "Return as soon as the TrainingJob is created")
	f.DurationVar(&so.timeout, "timeout", 0, "Stop waiting after this long (the job keeps running); 0 waits until it ends")
	return cmd
}

// Complete splits the arguments into the NAME and the command after --.
func (so *submitOptions) Complete(cmd *cobra.Command, args []string) error {
	so.names, so.command = args, nil
	if dash := cmd.ArgsLenAtDash(); dash >= 0 {
		so.names, so.command = args[:dash], args[dash:]
	}
	so.shaping = shapingFlags(cmd)
	return nil
}

// Validate checks the command line before anything is sent. Flags that
// shape the job cannot be combined with -f: the file is the whole truth.
func (so *submitOptions) Validate() error {
	if err := so.print.validate(); err != nil {
		return err
	}
	if len(so.names) > 1 {
		return fmt.Errorf("expected at most one NAME, got %q (put the command after --)", so.names)
	}
	switch {
	case so.file != "" && (len(so.shaping) > 0 || len(so.command) > 0):
		return fmt.Errorf("-f cannot be combined with %s: edit the file instead", strings.Join(append(so.shaping, "a command"), ", "))
	case so.file == "" && len(so.names) == 0:
		return fmt.Errorf("a NAME is needed (mlp train submit NAME --image IMAGE -- COMMAND...), or -f FILE")
	case so.file == "" && so.image == "":
		return fmt.Errorf("--image is needed (or -f FILE)")
	}
	if so.dryRun != "none" && so.dryRun != "client" && so.dryRun != "server" {
		return fmt.Errorf("--dry-run must be none, client or server, not %q", so.dryRun)
	}
	_, err := positiveQuantity("checkpoint-size", so.checkpoint)
	return errors.Join(
		atLeast("workers", int64(so.workers), 1),
		so.resources.validate(),
		err,
		timeoutFlag("timeout", so.timeout),
	)
}

// Run creates the job, or shows it for a dry run, and follows it unless
// --no-wait.
func (so *submitOptions) Run(ctx context.Context) error {
	s, err := so.session(ctx)
	if err != nil {
		return err
	}
	u, err := so.buildTrainingJob(s)
	if err != nil {
		return err
	}
	created, err := createObject(ctx, s, trainingJobKind, u, so.dryRun, so.printSubmitted)
	if err != nil || !created {
		return err
	}
	if so.noWait {
		return nil
	}
	return (&follower{Options: so.Options, s: s}).follow(ctx, u.GetName(), so.timeout)
}

func (so *submitOptions) printSubmitted(u *unstructured.Unstructured, suffix string) error {
	if so.print.human() {
		fmt.Fprintf(so.Streams.Out, "trainingjob.training.mlplatform.dev/%s created%s\n", u.GetName(), suffix)
		return nil
	}
	return so.print.printOne(u, trainingJobTable, so.Now, so.Streams.Out)
}

// buildTrainingJob reads -f or assembles the job from flags.
func (so *submitOptions) buildTrainingJob(s *session) (*unstructured.Unstructured, error) {
	if so.file != "" {
		return so.readTrainingJob(s)
	}
	tj, err := so.jobFromFlags(s.namespace)
	if err != nil {
		return nil, err
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: obj}
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	if so.backend != "" {
		if err := unstructured.SetNestedField(u.Object, so.backend, fieldBackend...); err != nil {
			return nil, err
		}
	}
	return u, nil
}

var shapingFlagNames = []string{"framework", "image", "workers", "gpus", "accelerator-type", "cpu", "memory", "env", "checkpoint-size", "queue", "feature-store", "backend"}

func shapingFlags(cmd *cobra.Command) []string {
	var out []string
	for _, n := range shapingFlagNames {
		if cmd.Flags().Changed(n) {
			out = append(out, "--"+n)
		}
	}
	return out
}

func (so *submitOptions) jobFromFlags(namespace string) (*trainingv1alpha1.TrainingJob, error) {
	name, command := so.names[0], so.command
	tj := &trainingv1alpha1.TrainingJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: trainingv1alpha1.GroupVersion.String(), Kind: "TrainingJob"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: trainingv1alpha1.TrainingJobSpec{
			Framework: trainingv1alpha1.Framework(so.framework),
			Image:     so.image,
			Command:   command,
			Workers:   so.workers,
			QueueName: so.queue,
		},
	}
	env, err := envVars(so.env)
	if err != nil {
		return nil, err
	}
	tj.Spec.Env = env
	for _, fs := range so.featureStores {
		tj.Spec.FeatureStores = append(tj.Spec.FeatureStores, commonv1alpha1.FeatureStoreReference{LocalObjectReference: commonv1alpha1.LocalObjectReference{Name: fs}})
	}
	res, err := so.resources.resources()
	if err != nil {
		return nil, err
	}
	tj.Spec.Resources = res
	size, err := positiveQuantity("checkpoint-size", so.checkpoint)
	if err != nil {
		return nil, err
	}
	if size != nil {
		tj.Spec.Checkpoint = &trainingv1alpha1.Checkpoint{Size: size}
	}
	return tj, nil
}

// readTrainingJob reads one TrainingJob of our API group from a file.
func (so *submitOptions) readTrainingJob(s *session) (*unstructured.Unstructured, error) {
	name := ""
	if len(so.names) == 1 {
		name = so.names[0]
	}
	return readObject(so.file, so.Streams.In, trainingJobKind, name, s)
}

// readObject reads one object of kind k from a file (- for stdin); name,
// when given, replaces the file's. An object without a namespace goes to
// the command line's; one with another namespace is refused when -n was
// given and otherwise becomes the session's namespace.
func readObject(path string, stdin io.Reader, k kind, name string, s *session) (*unstructured.Unstructured, error) {
	data, err := readManifest(path, stdin)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096).Decode(&u.Object); err != nil {
		return nil, fmt.Errorf("%s is not a YAML or JSON object: %w", path, err)
	}
	if gvk := u.GroupVersionKind(); gvk.Group != k.GVK.Group || gvk.Kind != k.GVK.Kind {
		return nil, fmt.Errorf("%s holds a %s %s, not a %s of %s", path, orDash(u.GetAPIVersion()), orDash(u.GetKind()), k.GVK.Kind, k.GVK.Group)
	}
	if name != "" {
		u.SetName(name)
	}
	if u.GetName() == "" {
		return nil, fmt.Errorf("%s has no metadata.name: set it or give NAME", path)
	}
	switch ns := u.GetNamespace(); {
	case ns == "":
		u.SetNamespace(s.namespace)
	case ns != s.namespace && s.explicitNamespace:
		return nil, fmt.Errorf("the namespace of %s (%s) does not match the namespace of the command line (%s)", path, ns, s.namespace)
	default:
		s.namespace = ns
	}
	return u, nil
}

// waitOptions wait for one object to reach its outcome, through wait: a
// TrainingJob to end, a Notebook to be Ready.
type waitOptions struct {
	*Options
	oneName
	timeout time.Duration
	wait    func(ctx context.Context, o *Options, s *session, name string, timeout time.Duration) error
}

func newWaitCommand(o *Options, k kind, short, timeoutUsage string, wait func(context.Context, *Options, *session, string, time.Duration) error) *cobra.Command {
	wo := &waitOptions{Options: o, wait: wait}
	cmd := &cobra.Command{
		Use:               "wait NAME",
		Short:             short,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNames(o, k),
		RunE:              runE(wo),
	}
	cmd.Flags().DurationVar(&wo.timeout, "timeout", 0, timeoutUsage)
	return cmd
}

func newTrainWaitCommand(o *Options) *cobra.Command {
	return newWaitCommand(o, trainingJobKind,
		"Wait for a TrainingJob to end, showing its progress (exit 0 succeeded, 1 failed, 2 still running)",
		"Stop waiting after this long (the job keeps running); 0 waits until it ends",
		func(ctx context.Context, o *Options, s *session, name string, timeout time.Duration) error {
			return (&follower{Options: o, s: s}).follow(ctx, name, timeout)
		})
}

func (wo *waitOptions) Validate() error { return timeoutFlag("timeout", wo.timeout) }

func (wo *waitOptions) Run(ctx context.Context) error {
	s, err := wo.session(ctx)
	if err != nil {
		return err
	}
	return wo.wait(ctx, wo.Options, s, wo.name, wo.timeout)
}

// createObject creates u, or shows it without creating it for --dry-run
// client (as built) or server (validated and defaulted by the API server).
// show prints the object with a suffix naming the dry run; created says
// whether the object now exists.
func createObject(ctx context.Context, s *session, k kind, u *unstructured.Unstructured, dryRun string, show func(u *unstructured.Unstructured, suffix string) error) (created bool, err error) {
	if dryRun == "client" {
		return false, show(u, " (dry run)")
	}
	opts := []client.CreateOption{client.FieldValidation("Strict")}
	if dryRun == "server" {
		opts = append(opts, client.DryRunAll)
	}
	if err := s.c.Create(ctx, u, opts...); err != nil {
		return false, explain(err, k, "create", u.GetName(), s.namespace)
	}
	if dryRun == "server" {
		return false, show(u, " (server dry run)")
	}
	return true, show(u, "")
}

// maxManifestBytes is the most -f reads: the API server refuses a request
// body over 3 MiB, so a larger file can never be created, and a stream
// without end (-f /dev/zero) must not fill the memory.
const maxManifestBytes = 3 << 20

// readManifest reads a file or standard input ("-"), at most
// maxManifestBytes of it. A regular file's size is checked before reading;
// a stream is read up to one byte past the limit.
func readManifest(path string, stdin io.Reader) ([]byte, error) {
	r := stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		defer func() { _ = f.Close() }()
		info, err := f.Stat()
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		if info.IsDir() {
			return nil, fmt.Errorf("%s is a directory: -f takes one file", path)
		}
		if info.Mode().IsRegular() && info.Size() > maxManifestBytes {
			return nil, tooLarge(path)
		}
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxManifestBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if len(data) > maxManifestBytes {
		return nil, tooLarge(path)
	}
	return data, nil
}

func tooLarge(path string) error {
	return fmt.Errorf("%s is larger than %d MiB, more than the API server accepts for one object: -f takes one TrainingJob", path, maxManifestBytes>>20)
}
