package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
)

func newFeatureStoreCommand(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "featurestore",
		Aliases: []string{"featurestores", "fs"},
		RunE:    groupRun,
		Short:   "Find FeatureStores and get their Feast client configuration (features.mlplatform.dev)",
	}
	cmd.AddCommand(
		newListCommand(o, featureStoreKind, featureStoreTable),
		newGetCommand(o, featureStoreKind, featureStoreTable),
		newFeatureStoreConfigCommand(o),
	)
	return cmd
}

var featureStoreTable = table{
	headers: func(wide bool) []string {
		h := []string{"NAME", "PROJECT", "READY", "REASON", "AGE"}
		if wide {
			h = append(h, "ONLINE", "OFFLINE", "REGISTRY")
		}
		return h
	},
	row: func(u *unstructured.Unstructured, wide bool, now time.Time) []string {
		f, err := typed[featuresv1alpha1.FeatureStore](u)
		if err != nil {
			return []string{u.GetName(), "<invalid>"}
		}
		ready, reason := "-", "-"
		if c := meta.FindStatusCondition(f.Status.Conditions, commonv1alpha1.ConditionReady); c != nil {
			ready, reason = string(c.Status), c.Reason
		}
		r := []string{f.Name, f.Spec.Project, ready, reason, age(f.CreationTimestamp.Time, now)}
		if wide {
			r = append(r, endpoint(f.Status.OnlineStore), endpoint(f.Status.OfflineStore), endpoint(f.Status.Registry))
		}
		return r
	},
}

func endpoint(p *featuresv1alpha1.ProvisionedStore) string {
	if p == nil {
		return "-"
	}
	return orDash(p.Endpoint)
}

type configOptions struct {
	*Options
	name   string
	file   string
	stdout bool
	force  bool
	// fileGiven is whether --file was on the command line.
	fileGiven bool
}

func newFeatureStoreConfigCommand(o *Options) *cobra.Command {
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
		ValidArgsFunction: completeNames(o, featureStoreKind),
		RunE:              runE(co),
	}
	cmd.Flags().StringVar(&co.file, "file", commonv1alpha1.FeatureStoreConfigKey, "File to write, created with mode 0600")
	cmd.Flags().BoolVar(&co.stdout, "stdout", false, "Print the configuration, credentials included, to standard output instead")
	cmd.Flags().BoolVar(&co.force, "force", false, "Replace an existing file")
	return cmd
}

func (co *configOptions) Complete(cmd *cobra.Command, args []string) error {
	co.name, co.fileGiven = args[0], cmd.Flags().Changed("file")
	return nil
}

func (co *configOptions) Validate() error {
	if co.stdout && co.fileGiven {
		return errors.New("--stdout and --file exclude each other")
	}
	return nil
}

func (co *configOptions) Run(ctx context.Context) error {
	s, err := co.session(ctx)
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

func featureStoreConfig(ctx context.Context, s *session, name string) ([]byte, error) {
	u, err := s.get(ctx, featureStoreKind, name)
	if err != nil {
		return nil, err
	}
	f, err := typed[featuresv1alpha1.FeatureStore](u)
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
	if err := s.c.Get(ctx, clientKey(s.namespace, cc.SecretName), &secret); err != nil {
		return nil, explainCore(err, "secrets", "get", cc.SecretName, s.namespace)
	}
	data, ok := secret.Data[firstNonEmpty(cc.Key, commonv1alpha1.FeatureStoreConfigKey)]
	if !ok || len(data) == 0 {
		return nil, fmt.Errorf("secret %q of FeatureStore %q has no key %q", cc.SecretName, name, cc.Key)
	}
	return data, nil
}
