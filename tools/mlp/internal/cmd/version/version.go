// Package version is `mlp version`: the client's version and what the
// cluster serves of ml-platform.
package version

import (
	"cmp"
	"context"
	"fmt"
	"sort"
	"text/tabwriter"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ml-platform/ml-platform/tools/mlp/internal/cmd/util"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/escape"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/kube"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/output"
)

// labelPartOf marks every operator Deployment of the ml-platform charts;
// app.kubernetes.io/version carries the chart's appVersion.
const (
	labelPartOf  = "app.kubernetes.io/part-of"
	labelVersion = "app.kubernetes.io/version"
	labelName    = "app.kubernetes.io/name"
)

type versionOptions struct {
	*util.Options
	util.NoFlagChecks
	clientOnly bool
}

// NewCommand is the version command.
func NewCommand(o *util.Options) *cobra.Command {
	vo := &versionOptions{Options: o}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the client's version and the versions of the operators and APIs in the cluster",
		Args:  cobra.NoArgs,
		RunE:  util.RunE(vo),
	}
	cmd.Flags().BoolVar(&vo.clientOnly, "client", false, "Only the client's version")
	return cmd
}

// Complete has nothing to take.
func (vo *versionOptions) Complete(*cobra.Command, []string) error { return nil }

// Run prints the versions.
func (vo *versionOptions) Run(ctx context.Context) error {
	fmt.Fprintf(vo.Streams.Out, "Client: mlp %s\n", vo.Version)
	if vo.clientOnly {
		return nil
	}
	s, err := vo.Session(ctx)
	if err != nil {
		return err
	}
	if err := vo.printAPIs(s); err != nil {
		return err
	}
	return vo.printOperators(ctx, s)
}

// printAPIs says which of our API versions the cluster serves; discovery is
// open to every authenticated user. Only a 404 means "not installed": any
// other error is the command's.
func (vo *versionOptions) printAPIs(s *kube.Session) error {
	for _, k := range []kube.Kind{kube.TrainingJobKind, kube.NotebookKind, kube.FeatureStoreKind} {
		state := "served"
		_, err := s.CS.Discovery().ServerResourcesForGroupVersion(k.GVK.GroupVersion().String())
		switch {
		case apierrors.IsNotFound(err):
			state = "not installed"
		case err != nil:
			return kube.ExplainCore(err, "the API "+k.GVK.GroupVersion().String(), "discover", "", "")
		}
		fmt.Fprintf(vo.Streams.Out, "API %s (%s): %s\n", k.GVK.GroupVersion(), k.Operator, state)
	}
	return nil
}

// printOperators lists the operator Deployments the user may see. Tenants
// usually may not list Deployments across namespaces; that is said, not
// treated as an error.
func (vo *versionOptions) printOperators(ctx context.Context, s *kube.Session) error {
	var deps appsv1.DeploymentList
	err := s.C.List(ctx, &deps, client.MatchingLabels{labelPartOf: "ml-platform"})
	if err != nil && !apierrors.IsForbidden(err) {
		return kube.ExplainCore(err, "deployments", "list", "", "")
	}
	if err != nil {
		fmt.Fprintf(vo.Streams.Out, "Operators: not visible to you (%s)\n", escape.Line(kube.ExplainCore(err, "deployments", "list", "", "").Error()))
		return nil
	}
	if len(deps.Items) == 0 {
		fmt.Fprintln(vo.Streams.Out, "Operators: none found")
		return nil
	}
	sort.Slice(deps.Items, func(i, j int) bool { return deps.Items[i].Name < deps.Items[j].Name })
	w := tabwriter.NewWriter(vo.Streams.Out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(w, "OPERATOR\tNAMESPACE\tVERSION\tREADY\tIMAGE")
	for _, d := range deps.Items {
		image := ""
		if cs := d.Spec.Template.Spec.Containers; len(cs) > 0 {
			image = cs[0].Image
		}
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d/%d\t%s\n", cmp.Or(d.Labels[labelName], d.Name), d.Namespace,
			output.OrDash(d.Labels[labelVersion]), d.Status.ReadyReplicas, want, escape.Line(output.OrDash(image)))
	}
	return w.Flush()
}
