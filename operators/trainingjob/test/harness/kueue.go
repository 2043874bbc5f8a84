package harness

import (
	"context"

	"k8s.io/client-go/rest"

	"github.com/ml-platform/ml-platform/shared/testenv/kueue"
)

// The real Kueue is started by shared/testenv/kueue, which the Notebook
// operator's tests use too; these names keep the TrainingJob tests'.

// KueueNamespace is Kueue's own namespace, its configuration's default.
const KueueNamespace = kueue.Namespace

// KueueOptions configure a started Kueue.
type KueueOptions = kueue.Options

// Kueue is Kueue's controller manager running as a process outside any
// cluster, with its CRDs and webhooks installed in the API server.
type Kueue = kueue.Kueue

// KueueBinary builds (once, cached) and returns the Kueue controller
// manager pinned in tools/kueue.
func KueueBinary(repoRoot string) (string, error) { return kueue.Binary(repoRoot) }

// KueueModuleDir is the source of the Kueue module pinned in tools/kueue in
// the module cache.
func KueueModuleDir(repoRoot string) (string, error) { return kueue.ModuleDir(repoRoot) }

// StartKueue installs Kueue's CRDs and webhooks and runs it (kueue.Start).
func StartKueue(ctx context.Context, admin *rest.Config, opts KueueOptions) (*Kueue, error) {
	return kueue.Start(ctx, admin, opts)
}
