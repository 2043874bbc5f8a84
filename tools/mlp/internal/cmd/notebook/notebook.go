// Package notebook is `mlp notebook`: create, list, describe, wait for,
// open, stop, start and delete Notebooks.
package notebook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/cmd/resource"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/cmd/util"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/kube"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/output"
)

// fieldNotebookSuspend is the Notebook's stop switch; its rename is a
// one-line change here.
var fieldNotebookSuspend = []string{"spec", "suspend"}

// NewCommand is the notebook command group.
func NewCommand(o *util.Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "notebook",
		Aliases: []string{"notebooks", "nb"},
		RunE:    util.GroupRun,
		Short:   "Create, open, stop and start Notebooks (notebooks.mlplatform.dev)",
	}
	cmd.AddCommand(
		newNotebookCreateCommand(o),
		resource.NewListCommand(o, kube.NotebookKind),
		resource.NewGetCommand(o, kube.NotebookKind),
		newNotebookDescribeCommand(o),
		resource.NewWaitCommand(o, kube.NotebookKind, "Wait for a Notebook to be Ready (exit 0 ready, 1 stalled, 2 still not ready)",
			"Stop waiting after this long; 0 waits until it is Ready", waitForNotebook),
		newNotebookOpenCommand(o),
		newNotebookStopCommand(o),
		newNotebookStartCommand(o),
		resource.NewDeleteCommand(o, kube.NotebookKind, " (the workspace volume follows its deletionPolicy)"),
	)
	return cmd
}

type notebookCreateOptions struct {
	*util.Options
	util.OneName
	image, workspace string
	resources        util.ResourceFlags
	featureStores    []string
	env              []string
	idleTimeout      time.Duration
	queue            string
	file             string
	dryRun           string
	wait, open       bool
	timeout          time.Duration
	shaping          []string
	print            *output.Flags
}

// Complete takes NAME, which -f makes optional, and notes the flags that
// shape the Notebook, which -f excludes.
func (co *notebookCreateOptions) Complete(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		co.Name = args[0]
	}
	co.shaping = nil
	for _, n := range []string{"image", "gpus", "accelerator-type", "cpu", "memory", "workspace", "feature-store", "env", "idle-timeout", "queue"} {
		if cmd.Flags().Changed(n) {
			co.shaping = append(co.shaping, "--"+n)
		}
	}
	return nil
}

// Validate refuses careless flags and -f mixed with flags that shape the
// Notebook.
func (co *notebookCreateOptions) Validate() error {
	if err := co.print.Validate(); err != nil {
		return err
	}
	switch {
	case co.file != "" && len(co.shaping) > 0:
		return fmt.Errorf("-f cannot be combined with %s: edit the file instead", strings.Join(co.shaping, ", "))
	case co.file == "" && co.Name == "":
		return fmt.Errorf("a NAME is needed (mlp notebook create NAME), or -f FILE")
	case co.dryRun != "none" && co.dryRun != "client" && co.dryRun != "server":
		return fmt.Errorf("--dry-run must be none, client or server, not %q", co.dryRun)
	case co.dryRun != "none" && (co.wait || co.open):
		return fmt.Errorf("--dry-run creates nothing to wait for or open")
	}
	_, err := util.PositiveQuantity("workspace", co.workspace)
	_, envErr := util.EnvVars(co.env)
	return errors.Join(co.resources.Validate(), err, envErr, util.TimeoutFlag("idle-timeout", co.idleTimeout), util.TimeoutFlag("timeout", co.timeout))
}

func newNotebookCreateCommand(o *util.Options) *cobra.Command {
	co := &notebookCreateOptions{Options: o, print: output.NewFlags()}
	cmd := &cobra.Command{
		Use:   "create [NAME]",
		Short: "Create a Notebook from flags or a file; --wait until it is Ready, --open it",
		Example: `  mlp notebook create alice --memory 8Gi --gpus 1 --workspace 20Gi
  mlp notebook create alice --env HF_HOME=/home/jovyan/hf --idle-timeout 2h --queue team-a --open
  mlp notebook create -f notebook.yaml --dry-run=server -o yaml`,
		Args: cobra.MaximumNArgs(1),
		RunE: util.RunE(co),
	}
	f := cmd.Flags()
	f.StringVar(&co.image, "image", "", "Jupyter image; empty for the platform's default")
	co.resources.AddFlags(f, "")
	f.StringVar(&co.workspace, "workspace", "", "Size of the workspace volume; empty for the platform's default")
	f.StringArrayVar(&co.featureStores, "feature-store", nil, "FeatureStore whose client configuration is mounted (repeatable)")
	_ = cmd.RegisterFlagCompletionFunc("feature-store", util.CompleteNames(o, kube.FeatureStoreKind))
	f.StringArrayVarP(&co.env, "env", "e", nil, "Environment variable NAME=VALUE (repeatable)")
	f.DurationVar(&co.idleTimeout, "idle-timeout", 0, "Stop the Notebook after this long without activity; 0 for the platform's default")
	f.StringVar(&co.queue, "queue", "", "Kueue LocalQueue to admit the Notebook's pod through")
	f.StringVarP(&co.file, "filename", "f", "", "File with a Notebook (YAML or JSON; - for stdin)")
	f.StringVar(&co.dryRun, "dry-run", "none", "none, client (print what would be sent) or server (validated and defaulted by the API server, nothing created)")
	f.Lookup("dry-run").NoOptDefVal = "client"
	_ = cmd.RegisterFlagCompletionFunc("dry-run", util.Fixed([]string{"none", "client", "server"}))
	f.BoolVar(&co.wait, "wait", false, "Wait until the Notebook is Ready")
	f.BoolVar(&co.open, "open", false, "Wait until the Notebook is Ready, then open it as `mlp notebook open` does")
	f.DurationVar(&co.timeout, "timeout", 0, "With --wait or --open, stop waiting after this long; 0 waits until it is Ready")
	co.print.AddFlags(cmd, false)
	return cmd
}

// Run creates the Notebook, then waits for it and opens it when asked.
func (co *notebookCreateOptions) Run(ctx context.Context) error {
	s, err := co.Session(ctx)
	if err != nil {
		return err
	}
	var u *unstructured.Unstructured
	if co.file != "" {
		u, err = resource.ReadObject(co.file, co.Streams.In, kube.NotebookKind, co.Name, s)
	} else {
		u, err = co.notebook(s.Namespace)
	}
	if err != nil {
		return err
	}
	created, err := resource.CreateObject(ctx, s, kube.NotebookKind, u, co.dryRun, co.printCreated)
	if err != nil || !created {
		return err
	}
	if !co.wait && !co.open {
		return nil
	}
	if err := waitForNotebook(ctx, co.Options, s, u.GetName(), co.timeout); err != nil || !co.open {
		return err
	}
	return (&openOptions{Options: co.Options, OneName: util.OneName{Name: u.GetName()}}).Run(ctx)
}

func (co *notebookCreateOptions) printCreated(u *unstructured.Unstructured, suffix string) error {
	if co.print.Human() {
		hint := ""
		if suffix == "" && !co.wait && !co.open {
			hint = fmt.Sprintf("; open it with `mlp notebook open %s`", u.GetName())
		}
		fmt.Fprintf(co.Streams.Out, "notebook.notebooks.mlplatform.dev/%s created%s%s\n", u.GetName(), suffix, hint)
		return nil
	}
	return co.print.PrintOne(u, co.Streams.Out)
}

// notebook is the Notebook the flags describe.
func (co *notebookCreateOptions) notebook(namespace string) (*unstructured.Unstructured, error) {
	name := co.Name
	nb := &notebooksv1alpha1.Notebook{}
	nb.APIVersion, nb.Kind = notebooksv1alpha1.GroupVersion.String(), "Notebook"
	nb.Name, nb.Namespace = name, namespace
	nb.Spec.Image = co.image
	res, err := co.resources.Resources()
	if err != nil {
		return nil, err
	}
	if res != nil {
		nb.Spec.Resources = *res
	}
	size, err := util.PositiveQuantity("workspace", co.workspace)
	if err != nil {
		return nil, err
	}
	nb.Spec.Workspace.Size = size
	if nb.Spec.Env, err = util.EnvVars(co.env); err != nil {
		return nil, err
	}
	if co.idleTimeout > 0 {
		nb.Spec.Culling.IdleTimeout = &metav1.Duration{Duration: co.idleTimeout}
	}
	nb.Spec.QueueName = co.queue
	for _, fs := range co.featureStores {
		nb.Spec.FeatureStores = append(nb.Spec.FeatureStores, commonv1alpha1.FeatureStoreReference{LocalObjectReference: commonv1alpha1.LocalObjectReference{Name: fs}})
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(nb)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: obj}
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u, nil
}

// notebookSwitchOptions stops a Notebook (spec.suspend) or starts a stopped
// or culled one (spec.suspend and the restart annotation, a request the
// operator handles once per value).
type notebookSwitchOptions struct {
	*util.Options
	util.OneName
	util.NoFlagChecks
	start bool
}

func newNotebookStopCommand(o *util.Options) *cobra.Command {
	return &cobra.Command{
		Use:               "stop NAME",
		Short:             "Stop a Notebook: its pod goes away, its workspace stays",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: util.CompleteNames(o, kube.NotebookKind),
		RunE:              util.RunE(&notebookSwitchOptions{Options: o}),
	}
}

func newNotebookStartCommand(o *util.Options) *cobra.Command {
	return &cobra.Command{
		Use:               "start NAME",
		Short:             "Start a stopped or culled Notebook",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: util.CompleteNames(o, kube.NotebookKind),
		RunE:              util.RunE(&notebookSwitchOptions{Options: o, start: true}),
	}
}

// Run patches spec.suspend, and asks for a restart on start.
func (so *notebookSwitchOptions) Run(ctx context.Context) error {
	s, err := so.Session(ctx)
	if err != nil {
		return err
	}
	patch := map[string]any{fieldNotebookSuspend[0]: map[string]any{fieldNotebookSuspend[1]: !so.start}}
	if so.start {
		patch["metadata"] = map[string]any{"annotations": map[string]any{
			notebooksv1alpha1.AnnotationRestart: so.Now().UTC().Format(time.RFC3339Nano),
		}}
	}
	b, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	if _, err := s.MergePatch(ctx, kube.NotebookKind, so.Name, b); err != nil {
		return err
	}
	if so.start {
		fmt.Fprintf(so.Streams.Out, "notebook.notebooks.mlplatform.dev %q started; open it with `mlp notebook open %s`\n", so.Name, so.Name)
	} else {
		fmt.Fprintf(so.Streams.Out, "notebook.notebooks.mlplatform.dev %q stopped\n", so.Name)
	}
	return nil
}

// notebookPod is the Running pod behind a Notebook's Service, or nil.
func notebookPod(pods []corev1.Pod) *corev1.Pod {
	for i := range pods {
		if pods[i].DeletionTimestamp == nil && pods[i].Status.Phase == corev1.PodRunning && kube.PodReady(&pods[i]) {
			return &pods[i]
		}
	}
	return nil
}
