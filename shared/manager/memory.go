package manager

import (
	"fmt"
	"runtime/debug"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	ctrl "sigs.k8s.io/controller-runtime"
)

// memoryLimitShare is the part of the container's memory limit that the Go
// runtime is asked to stay within. Its garbage collector then works harder
// as the heap nears the limit, instead of letting the heap grow to twice
// what is live (GOGC=100) and the kernel kill the process: at 20 000
// TrainingJobs the operator held 625 MiB of heap for about 370 MiB of live
// objects. The rest is left for what the runtime does not count (the
// binary, thread stacks beyond its own) and for the moments the collector
// runs behind.
const memoryLimitShare = 0.9

// softMemoryLimit is the limit the runtime gets for a container limit of
// limit bytes: none (0) without a limit or when GOMEMLIMIT is set, which
// the runtime has already applied and a person chose.
func softMemoryLimit(limit int64, gomemlimit string) int64 {
	if limit <= 0 || strings.TrimSpace(gomemlimit) != "" {
		return 0
	}
	return int64(float64(limit) * memoryLimitShare)
}

// applyMemoryLimit sets the runtime's soft memory limit from
// Config.MemoryLimit, once per process.
func applyMemoryLimit(cfg Config, gomemlimit string) {
	soft := softMemoryLimit(cfg.MemoryLimit, gomemlimit)
	if soft == 0 {
		return
	}
	debug.SetMemoryLimit(soft)
	ctrl.Log.WithName("setup").Info("Go runtime memory limit set below the container's",
		"containerLimit", resource.NewQuantity(cfg.MemoryLimit, resource.BinarySI).String(),
		"softLimit", resource.NewQuantity(soft, resource.BinarySI).String())
}

// minMemoryLimit is the smallest --memory-limit taken: no operator starts
// in less, and a soft limit below what is live keeps the garbage collector
// running without end, an operator that stalls without saying why
// ("--memory-limit=512" meant as 512Mi is 512 bytes).
const minMemoryLimit = 32 << 20

// parseMemoryLimit reads --memory-limit: a Kubernetes quantity ("512Mi", or
// the bytes the downward API gives); empty or 0 means none.
func parseMemoryLimit(v string) (int64, error) {
	if strings.TrimSpace(v) == "" {
		return 0, nil
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return 0, err
	}
	if n := q.Value(); n != 0 && n < minMemoryLimit {
		return 0, fmt.Errorf("%s is %d bytes, below the %s an operator needs; a quantity takes a unit, such as 512Mi", v, n, resource.NewQuantity(minMemoryLimit, resource.BinarySI))
	}
	return q.Value(), nil
}
