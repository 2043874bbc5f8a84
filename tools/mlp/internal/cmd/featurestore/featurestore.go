// Package featurestore is `mlp featurestore`: list FeatureStores and write
// their Feast client configuration.
package featurestore

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/cmd/resource"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/cmd/util"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/kube"
)

// NewCommand is the featurestore command group.
func NewCommand(o *util.Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "featurestore",
		Aliases: []string{"featurestores", "fs"},
		RunE:    util.GroupRun,
		Short:   "Find FeatureStores and get their Feast client configuration (features.mlplatform.dev)",
	}
	cmd.AddCommand(
		resource.NewListCommand(o, kube.FeatureStoreKind),
		resource.NewGetCommand(o, kube.FeatureStoreKind),
		newFeatureStoreConfigCommand(o),
	)
	return cmd
}

type configOptions struct {
	*util.Options
	name   string
	file   string
	stdout bool
	force  bool
	// fileGiven is whether --file was on the command line.
	fileGiven bool
}

func newFeatureStoreConfigCommand(o *util.Options) *cobra.Command {
	co := &configOptions{Options: o}
	cmd := &cobra.Command{
		Use:   "config NAME",
		Short: "Write the FeatureStore's Feast feature_store.yaml (it holds credentials)",
		Long: `Write the Feast client configuration (feature_store.yaml) the FeatureStore
publishes. It holds database credentials, so it is written to a file that only
you can read (mode 0600), and to standard output only with --stdout. Its
endpoints are the cluster's Service names: from a laptop, port-forward to them
and point the file's hosts at 127.0.0.1.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: util.CompleteNames(o, kube.FeatureStoreKind),
		RunE:              util.RunE(co),
	}
	cmd.Flags().StringVar(&co.file, "file", commonv1alpha1.FeatureStoreConfigKey, "File to write, created with mode 0600")
	cmd.Flags().BoolVar(&co.stdout, "stdout", false, "Print the configuration, credentials included, to standard output instead")
	cmd.Flags().BoolVar(&co.force, "force", false, "Replace an existing file")
	return cmd
}

// Complete takes NAME and notes whether --file was given.
func (co *configOptions) Complete(cmd *cobra.Command, args []string) error {
	co.name, co.fileGiven = args[0], cmd.Flags().Changed("file")
	return nil
}

// Validate refuses --stdout with --file.
func (co *configOptions) Validate() error {
	if co.stdout && co.fileGiven {
		return errors.New("--stdout and --file exclude each other")
	}
	return nil
}

// Run writes the configuration to the file, or to stdout.
func (co *configOptions) Run(ctx context.Context) error {
	s, err := co.Session(ctx)
	if err != nil {
		return err
	}
	data, err := featureStoreConfig(ctx, s, co.name)
	if err != nil {
		return err
	}
	if co.stdout {
		_, err := co.Streams.Out.Write(data)
		return err
	}
	if err := writePrivate(co.file, data, co.force); err != nil {
		return err
	}
	fmt.Fprintf(co.Streams.ErrOut, "wrote %s (mode 0600); use it with FEAST_FS_YAML_FILE_PATH=%s or feast -f %s\n", co.file, co.file, co.file)
	return nil
}

func featureStoreConfig(ctx context.Context, s *kube.Session, name string) ([]byte, error) {
	u, err := s.Get(ctx, kube.FeatureStoreKind, name)
	if err != nil {
		return nil, err
	}
	f, err := kube.Typed[featuresv1alpha1.FeatureStore](u)
	if err != nil {
		return nil, err
	}
	cc := f.Status.ClientConfig
	if cc == nil || cc.SecretName == "" {
		why := "it is not provisioned yet"
		if c := meta.FindStatusCondition(f.Status.Conditions, commonv1alpha1.ConditionReady); c != nil && c.Message != "" {
			why = c.Message
		}
		return nil, fmt.Errorf("FeatureStore %q has not published a client configuration: %s", name, why)
	}
	var secret corev1.Secret
	if err := s.C.Get(ctx, kube.Key(s.Namespace, cc.SecretName), &secret); err != nil {
		return nil, kube.ExplainCore(err, "secrets", "get", cc.SecretName, s.Namespace)
	}
	data, ok := secret.Data[cmp.Or(cc.Key, commonv1alpha1.FeatureStoreConfigKey)]
	if !ok || len(data) == 0 {
		return nil, fmt.Errorf("secret %q of FeatureStore %q has no key %q", cc.SecretName, name, cc.Key)
	}
	return data, nil
}
