package trainingjob

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/nativejob"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// BenchmarkTrainingJobWrites prices, in the API server's CPU per request
// (testenv's APIServerCPU), the writes a native job of four pods makes
// of its TrainingJob, against its child Job's create, which the bare
// Indexed Job makes too (issue 25): the TrainingJob's create, and the
// three status patches the operator writes, the run created, running and
// succeeded, as it writes them (a JSON merge patch of the status
// subresource). A status patch of a custom resource is decoded, merged,
// validated against the schema and its CEL rules (every rule on the spec
// included, errors on unchanged fields ratcheted) and stored as JSON.
//
//	go test -run '^$' -bench BenchmarkTrainingJobWrites -benchtime=1000x ./internal/controller/trainingjob/
func BenchmarkTrainingJobWrites(b *testing.B) {
	operatorConfig(b)
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	native := nativejob.NewBackend(testSettings)
	var ns string
	created := 0
	now := time.Now().UTC().Format(time.RFC3339)
	condition := func(typ, status, reason, message string) string {
		return fmt.Sprintf(`{"type":%q,"status":%q,"reason":%q,"message":%q,"observedGeneration":1,"lastTransitionTime":%q}`, typ, status, reason, message, now)
	}
	statuses := map[string]func(name string) string{
		"status-created": func(name string) string {
			return fmt.Sprintf(`{"status":{"backend":"native","observedGeneration":1,"phase":"Created","run":1,"job":{"apiVersion":"batch/v1","kind":"Job","name":"%s-r1"},"conditions":[%s,%s,%s]}}`, name,
				condition("Created", "True", "JobCreated", "Job "+name+"-r1 created"), condition("Running", "False", "Created", "The pods are starting"),
				condition("Suspended", "False", "NotSuspended", "The job runs"))
		},
		"status-running": func(name string) string {
			return fmt.Sprintf(`{"status":{"phase":"Running","startTime":%q,"roles":[{"name":"Master","active":1},{"name":"Worker","active":3}],"conditions":[%s,%s,%s]}}`, now,
				condition("Created", "True", "JobCreated", "Job "+name+"-r1 created"), condition("Running", "True", "Running", "All pods run"),
				condition("Suspended", "False", "NotSuspended", "The job runs"))
		},
		"status-succeeded": func(name string) string {
			return fmt.Sprintf(`{"status":{"phase":"Succeeded","completionTime":%q,"duration":"11s","roles":[{"name":"Master","succeeded":1},{"name":"Worker","succeeded":3}],"runs":[{"run":1,"reason":"Succeeded","startTime":%q,"endTime":%q}],"conditions":[%s,%s,%s,%s,%s,%s]}}`, now, now, now,
				condition("Created", "True", "JobCreated", "Job "+name+"-r1 created"), condition("Running", "False", "Finished", "The job finished"),
				condition("Suspended", "False", "Finished", "The job finished"), condition("Succeeded", "True", "Succeeded", "Reached expected number of succeeded pods"),
				condition("Failed", "False", "Succeeded", "Reached expected number of succeeded pods"), condition("Finished", "True", "Succeeded", "Reached expected number of succeeded pods"))
		},
	}
	b.Run("create", func(b *testing.B) {
		ns, created = testenv.CreateNamespace(b, c, "bench-writes"), b.N
		env.PriceRequests(b, func(ctx context.Context, i int) error {
			return c.Create(ctx, newTrainingJob(ns, fmt.Sprintf("j%05d", i), 3))
		})
	})
	for _, name := range []string{"status-created", "status-running", "status-succeeded"} {
		b.Run(name, func(b *testing.B) {
			if created == 0 {
				b.Skip("the status patches need the TrainingJobs of the create sub-benchmark")
			}
			env.PriceRequests(b, func(ctx context.Context, i int) error {
				tj := newTrainingJob(ns, fmt.Sprintf("j%05d", i%created), 3)
				return c.Status().Patch(ctx, tj, client.RawPatch(types.MergePatchType, []byte(statuses[name](tj.Name))))
			})
		})
	}
	// Runs 1, 2, ... of the created jobs, each child new: go test calls a
	// benchmark once with one iteration before the asked number.
	jobs := 0
	b.Run("child-job-create", func(b *testing.B) {
		if created == 0 {
			b.Skip("the children need the TrainingJobs of the create sub-benchmark")
		}
		env.PriceRequests(b, func(ctx context.Context, _ int) error {
			tj := newTrainingJob(ns, fmt.Sprintf("j%05d", jobs%created), 3)
			job, err := native.Build(tj, int32(1+jobs/created), nil)
			if err != nil {
				return err
			}
			jobs++
			return c.Create(ctx, job)
		})
	})
}
