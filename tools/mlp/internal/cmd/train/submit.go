package train

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/cmd/resource"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/cmd/util"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/follow"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/kube"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/output"
)

type submitOptions struct {
	*util.Options

	file          string
	framework     string
	image         string
	workers       int32
	resources     util.ResourceFlags
	env           []string
	checkpoint    string
	queue         string
	featureStores []string
	backend       string
	dryRun        string
	print         *output.Flags
	noWait        bool
	timeout       time.Duration

	// Completed from the command line: the NAME, the command after --,
	// and the flags that shape a job (which -f excludes).
	names, command []string
	shaping        []string
}

func newSubmitCommand(o *util.Options) *cobra.Command {
	so := &submitOptions{Options: o, print: output.NewFlags()}
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
		RunE: util.RunE(so),
	}
	f := cmd.Flags()
	f.StringVarP(&so.file, "filename", "f", "", "File with a TrainingJob (YAML or JSON; - for stdin)")
	f.StringVar(&so.framework, "framework", string(trainingv1alpha1.FrameworkPyTorch), "Framework: pytorch, tensorflow, xgboost, paddle or jax (jax on the native backend only)")
	f.StringVar(&so.image, "image", "", "Image of the training container")
	f.Int32Var(&so.workers, "workers", 1, "Pods taking part in the training, rank 0 included")
	so.resources.AddFlags(f, " per pod")
	f.StringArrayVarP(&so.env, "env", "e", nil, "Environment variable NAME=VALUE (repeatable)")
	f.StringVar(&so.checkpoint, "checkpoint-size", "", "Size of a checkpoint volume the operator creates, e.g. 10Gi")
	f.StringVar(&so.queue, "queue", "", "Kueue LocalQueue to submit to")
	f.StringArrayVar(&so.featureStores, "feature-store", nil, "FeatureStore whose client configuration is mounted (repeatable)")
	_ = cmd.RegisterFlagCompletionFunc("feature-store", util.CompleteNames(o, kube.FeatureStoreKind))
	f.StringVar(&so.backend, "backend", "", "Training backend (native or kubeflow); empty for the platform's default")
	f.StringVar(&so.dryRun, "dry-run", "none", "none, client (print what would be sent) or server (validated and defaulted by the API server, nothing created)")
	f.Lookup("dry-run").NoOptDefVal = "client"
	_ = cmd.RegisterFlagCompletionFunc("framework", util.Fixed(frameworks))
	_ = cmd.RegisterFlagCompletionFunc("backend", util.Fixed(backends))
	_ = cmd.RegisterFlagCompletionFunc("dry-run", util.Fixed([]string{"none", "client", "server"}))
	so.print.AddFlags(cmd, false)
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
	if err := so.print.Validate(); err != nil {
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
	_, err := util.PositiveQuantity("checkpoint-size", so.checkpoint)
	return errors.Join(
		util.AtLeast("workers", int64(so.workers), 1),
		so.resources.Validate(),
		err,
		util.TimeoutFlag("timeout", so.timeout),
	)
}

// Run creates the job, or shows it for a dry run, and follows it unless
// --no-wait.
func (so *submitOptions) Run(ctx context.Context) error {
	s, err := so.Session(ctx)
	if err != nil {
		return err
	}
	u, err := so.buildTrainingJob(s)
	if err != nil {
		return err
	}
	created, err := resource.CreateObject(ctx, s, kube.TrainingJobKind, u, so.dryRun, so.printSubmitted)
	if err != nil || !created {
		return err
	}
	if so.noWait {
		return nil
	}
	return follow.Job(ctx, so.Options, s, u.GetName(), so.timeout)
}

func (so *submitOptions) printSubmitted(u *unstructured.Unstructured, suffix string) error {
	if so.print.Human() {
		fmt.Fprintf(so.Streams.Out, "trainingjob.training.mlplatform.dev/%s created%s\n", u.GetName(), suffix)
		return nil
	}
	return so.print.PrintOne(u, so.Streams.Out)
}

// buildTrainingJob reads -f or assembles the job from flags.
func (so *submitOptions) buildTrainingJob(s *kube.Session) (*unstructured.Unstructured, error) {
	if so.file != "" {
		return so.readTrainingJob(s)
	}
	tj, err := so.jobFromFlags(s.Namespace)
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
	env, err := util.EnvVars(so.env)
	if err != nil {
		return nil, err
	}
	tj.Spec.Env = env
	for _, fs := range so.featureStores {
		tj.Spec.FeatureStores = append(tj.Spec.FeatureStores, commonv1alpha1.FeatureStoreReference{LocalObjectReference: commonv1alpha1.LocalObjectReference{Name: fs}})
	}
	res, err := so.resources.Resources()
	if err != nil {
		return nil, err
	}
	tj.Spec.Resources = res
	size, err := util.PositiveQuantity("checkpoint-size", so.checkpoint)
	if err != nil {
		return nil, err
	}
	if size != nil {
		tj.Spec.Checkpoint = &trainingv1alpha1.Checkpoint{Size: size}
	}
	return tj, nil
}

// readTrainingJob reads one TrainingJob of our API group from a file.
func (so *submitOptions) readTrainingJob(s *kube.Session) (*unstructured.Unstructured, error) {
	name := ""
	if len(so.names) == 1 {
		name = so.names[0]
	}
	return resource.ReadObject(so.file, so.Streams.In, kube.TrainingJobKind, name, s)
}

func newTrainWaitCommand(o *util.Options) *cobra.Command {
	return resource.NewWaitCommand(o, kube.TrainingJobKind,
		"Wait for a TrainingJob to end, showing its progress (exit 0 succeeded, 1 failed, 2 still running)",
		"Stop waiting after this long (the job keeps running); 0 waits until it ends",
		follow.Job)
}

// frameworks and backends are the values of --framework and --backend.
var (
	frameworks = []string{
		string(trainingv1alpha1.FrameworkPyTorch), string(trainingv1alpha1.FrameworkTensorFlow),
		string(trainingv1alpha1.FrameworkXGBoost), string(trainingv1alpha1.FrameworkPaddle),
	}
	backends = []string{string(trainingv1alpha1.BackendNative), string(trainingv1alpha1.BackendKubeflow)}
)
