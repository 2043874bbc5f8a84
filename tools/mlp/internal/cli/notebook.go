package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
)

// fieldNotebookSuspend is the Notebook's stop switch; its rename is a
// one-line change here.
var fieldNotebookSuspend = []string{"spec", "suspend"}

func newNotebookCommand(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "notebook",
		Aliases: []string{"notebooks", "nb"},
		RunE:    groupRun,
		Short:   "Create, open, stop and start Notebooks (notebooks.mlplatform.dev)",
	}
	cmd.AddCommand(
		newNotebookCreateCommand(o),
		newListCommand(o, notebookKind, notebookTable),
		newGetCommand(o, notebookKind, notebookTable),
		newNotebookOpenCommand(o),
		newNotebookStopCommand(o),
		newNotebookStartCommand(o),
		newDeleteCommand(o, notebookKind, " (the workspace volume follows its deletionPolicy)"),
	)
	return cmd
}

var notebookTable = table{
	headers: func(wide bool) []string {
		h := []string{"NAME", "STATUS", "IMAGE", "LAST ACTIVITY", "AGE"}
		if wide {
			h = append(h, "CULL DEADLINE", "URL")
		}
		return h
	},
	row: func(u *unstructured.Unstructured, wide bool, now time.Time) []string {
		nb, err := typed[notebooksv1alpha1.Notebook](u)
		if err != nil {
			return []string{u.GetName(), "<invalid>"}
		}
		last := "-"
		if nb.Status.LastActivity != nil {
			last = age(nb.Status.LastActivity.Time, now)
		}
		r := []string{nb.Name, orDash(string(nb.Status.Phase)), orDash(nb.Status.Image), last, age(nb.CreationTimestamp.Time, now)}
		if wide {
			deadline := "-"
			if nb.Status.CullDeadline != nil {
				deadline = nb.Status.CullDeadline.UTC().Format(time.RFC3339)
			}
			r = append(r, deadline, orDash(firstNonEmpty(nb.Status.IngressURL, nb.Status.URL)))
		}
		return r
	},
}

type notebookCreateOptions struct {
	*Options
	oneName
	image, workspace string
	resources        resourceFlags
	featureStores    []string
	print            *printFlags
}

func (co *notebookCreateOptions) Validate() error {
	if err := co.print.validate(); err != nil {
		return err
	}
	_, err := positiveQuantity("workspace", co.workspace)
	return errors.Join(co.resources.validate(), err)
}

func newNotebookCreateCommand(o *Options) *cobra.Command {
	co := &notebookCreateOptions{Options: o, print: newPrintFlags()}
	cmd := &cobra.Command{
		Use:     "create NAME",
		Short:   "Create a Notebook",
		Example: `  mlp notebook create alice --memory 8Gi --gpus 1 --workspace 20Gi`,
		Args:    cobra.ExactArgs(1),
		RunE:    runE(co),
	}
	f := cmd.Flags()
	f.StringVar(&co.image, "image", "", "Jupyter image; empty for the platform's default")
	co.resources.addFlags(f, "")
	f.StringVar(&co.workspace, "workspace", "", "Size of the workspace volume; empty for the platform's default")
	f.StringArrayVar(&co.featureStores, "feature-store", nil, "FeatureStore whose client configuration is mounted (repeatable)")
	_ = cmd.RegisterFlagCompletionFunc("feature-store", completeNames(o, featureStoreKind))
	co.print.addFlags(cmd, false)
	return cmd
}

func (co *notebookCreateOptions) Run(ctx context.Context) error {
	s, err := co.session(ctx)
	if err != nil {
		return err
	}
	u, err := co.notebook(s.namespace)
	if err != nil {
		return err
	}
	if err := s.c.Create(ctx, u, client.FieldValidation("Strict")); err != nil {
		return explain(err, notebookKind, "create", co.name, s.namespace)
	}
	if co.print.human() {
		fmt.Fprintf(co.Streams.Out, "notebook.notebooks.mlplatform.dev/%s created; open it with `mlp notebook open %s`\n", co.name, co.name)
		return nil
	}
	return co.print.printOne(u, notebookTable, co.Now, co.Streams.Out)
}

// notebook is the Notebook the flags describe.
func (co *notebookCreateOptions) notebook(namespace string) (*unstructured.Unstructured, error) {
	name := co.name
	nb := &notebooksv1alpha1.Notebook{}
	nb.APIVersion, nb.Kind = notebooksv1alpha1.GroupVersion.String(), "Notebook"
	nb.Name, nb.Namespace = name, namespace
	nb.Spec.Image = co.image
	res, err := co.resources.resources()
	if err != nil {
		return nil, err
	}
	if res != nil {
		nb.Spec.Resources = *res
	}
	size, err := positiveQuantity("workspace", co.workspace)
	if err != nil {
		return nil, err
	}
	nb.Spec.Workspace.Size = size
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
	*Options
	oneName
	noFlagChecks
	start bool
}

func newNotebookStopCommand(o *Options) *cobra.Command {
	return &cobra.Command{
		Use:               "stop NAME",
		Short:             "Stop a Notebook: its pod goes away, its workspace stays",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNames(o, notebookKind),
		RunE:              runE(&notebookSwitchOptions{Options: o}),
	}
}

func newNotebookStartCommand(o *Options) *cobra.Command {
	return &cobra.Command{
		Use:               "start NAME",
		Short:             "Start a stopped or culled Notebook",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNames(o, notebookKind),
		RunE:              runE(&notebookSwitchOptions{Options: o, start: true}),
	}
}

func (so *notebookSwitchOptions) Run(ctx context.Context) error {
	s, err := so.session(ctx)
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
	if _, err := s.mergePatch(ctx, notebookKind, so.name, b); err != nil {
		return err
	}
	if so.start {
		fmt.Fprintf(so.Streams.Out, "notebook.notebooks.mlplatform.dev %q started; open it with `mlp notebook open %s`\n", so.name, so.name)
	} else {
		fmt.Fprintf(so.Streams.Out, "notebook.notebooks.mlplatform.dev %q stopped\n", so.name)
	}
	return nil
}

// notebookPod is the Running pod behind a Notebook's Service, or nil.
func notebookPod(pods []corev1.Pod) *corev1.Pod {
	for i := range pods {
		if pods[i].DeletionTimestamp == nil && pods[i].Status.Phase == corev1.PodRunning && podReady(&pods[i]) {
			return &pods[i]
		}
	}
	return nil
}
