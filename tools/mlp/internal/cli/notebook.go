package cli

import (
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
	image, workspace string
	resources        resourceFlags
	featureStores    []string
	output           string
}

func (co *notebookCreateOptions) validate() error {
	if err := checkOutput(co.output); err != nil {
		return err
	}
	_, err := positiveQuantity("workspace", co.workspace)
	return errors.Join(co.resources.validate(), err)
}

func newNotebookCreateCommand(o *Options) *cobra.Command {
	co := notebookCreateOptions{}
	cmd := &cobra.Command{
		Use:     "create NAME",
		Short:   "Create a Notebook",
		Example: `  mlp notebook create alice --memory 8Gi --gpus 1 --workspace 20Gi`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := co.validate(); err != nil {
				return err
			}
			s, err := o.session(cmd.Context())
			if err != nil {
				return err
			}
			u, err := notebookFromFlags(args[0], s.namespace, &co)
			if err != nil {
				return err
			}
			if err := s.c.Create(cmd.Context(), u, client.FieldValidation("Strict")); err != nil {
				return explain(err, notebookKind, "create", args[0], s.namespace)
			}
			if co.output == outTable || co.output == outWide {
				fmt.Fprintf(o.Streams.Out, "notebook.notebooks.mlplatform.dev/%s created; open it with `mlp notebook open %s`\n", args[0], args[0])
				return nil
			}
			return printObjects(o.Streams.Out, co.output, notebookKind, notebookTable, []unstructured.Unstructured{*u}, true, o.Now())
		},
	}
	f := cmd.Flags()
	f.StringVar(&co.image, "image", "", "Jupyter image; empty for the platform's default")
	co.resources.addFlags(f, "")
	f.StringVar(&co.workspace, "workspace", "", "Size of the workspace volume; empty for the platform's default")
	f.StringArrayVar(&co.featureStores, "feature-store", nil, "FeatureStore whose client configuration is mounted (repeatable)")
	addOutputFlag(cmd, &co.output)
	return cmd
}

func notebookFromFlags(name, namespace string, co *notebookCreateOptions) (*unstructured.Unstructured, error) {
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

func newNotebookStopCommand(o *Options) *cobra.Command {
	return &cobra.Command{
		Use:               "stop NAME",
		Short:             "Stop a Notebook: its pod goes away, its workspace stays",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNames(o, notebookKind),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := o.session(cmd.Context())
			if err != nil {
				return err
			}
			patch, err := mergePatchAt(fieldNotebookSuspend, true)
			if err != nil {
				return err
			}
			if _, err := s.mergePatch(cmd.Context(), notebookKind, args[0], patch); err != nil {
				return err
			}
			fmt.Fprintf(o.Streams.Out, "notebook.notebooks.mlplatform.dev %q stopped\n", args[0])
			return nil
		},
	}
}

// newNotebookStartCommand starts a stopped Notebook (spec) and a culled one
// (the restart annotation, a request the operator handles once per value).
func newNotebookStartCommand(o *Options) *cobra.Command {
	return &cobra.Command{
		Use:               "start NAME",
		Short:             "Start a stopped or culled Notebook",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNames(o, notebookKind),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := o.session(cmd.Context())
			if err != nil {
				return err
			}
			patch := map[string]any{
				"metadata": map[string]any{"annotations": map[string]any{
					notebooksv1alpha1.AnnotationRestart: o.Now().UTC().Format(time.RFC3339Nano),
				}},
			}
			spec := map[string]any{}
			spec[fieldNotebookSuspend[1]] = false
			patch[fieldNotebookSuspend[0]] = spec
			b, err := jsonMarshal(patch)
			if err != nil {
				return err
			}
			if _, err := s.mergePatch(cmd.Context(), notebookKind, args[0], b); err != nil {
				return err
			}
			fmt.Fprintf(o.Streams.Out, "notebook.notebooks.mlplatform.dev %q started; open it with `mlp notebook open %s`\n", args[0], args[0])
			return nil
		},
	}
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
