// Command notebook-operator runs the Notebook reconciler.
package main

import (
	"flag"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/config"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/controller/notebook"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/render"
	"github.com/ml-platform/ml-platform/shared/accelerator"
	"github.com/ml-platform/ml-platform/shared/manager"
)

func main() {
	configFile := flag.String("config", "", "The platform configuration file (image, culling defaults and bounds, probe, NetworkPolicy, Ingress). Empty means the built-in defaults.")
	acceleratorsFile := accelerator.BindFlag(flag.CommandLine)

	manager.Main(manager.Options{
		Name:         render.OperatorName,
		AddToScheme:  []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, notebooksv1alpha1.AddToScheme},
		OwnedObjects: notebook.OwnedObjects(),
		Transforms:   map[client.Object]toolscache.TransformFunc{&notebooksv1alpha1.Notebook{}: manager.StripLastApplied},
		Defaults:     defaults,
		Setup: func(mgr ctrl.Manager, cfg manager.Config) error {
			// Flags are parsed by now: Setup runs inside manager.Main.
			c, err := config.Load(*configFile)
			if err != nil {
				return err
			}
			catalog, err := accelerator.Load(*acceleratorsFile)
			if err != nil {
				return err
			}
			r, err := notebook.NewReconciler(mgr, c, catalog)
			if err != nil {
				return err
			}
			r.Namespaces = cfg.CacheNamespaces()
			return r.SetupWithManager(mgr, cfg.ControllerOptions())
		},
	})
}

// defaults gives the operator as many workers as probes may run at once.
// No reconcile waits for a Jupyter server (the probes run in the
// background), but every answer brings its notebook back for the decisions
// that waited for it: with the shared default of one worker, the answers
// of a check would queue behind each other, and behind every other
// notebook's start and changes.
func defaults(c *manager.Config) {
	c.MaxConcurrentReconciles = config.Default().Probe.Concurrency
}
