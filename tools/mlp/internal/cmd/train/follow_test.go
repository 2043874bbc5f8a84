package train

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ml-platform/ml-platform/shared/testenv"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/cmd/util"
	"github.com/ml-platform/ml-platform/tools/mlp/test/clitest"
)

// TestFollowEndsWhenTheJobIsDeleted: `train submit` and `train wait` exit 1
// with a clear message when the followed job is deleted, and when it is
// replaced by a new job of the same name.
func TestFollowEndsWhenTheJobIsDeleted(t *testing.T) {
	ns := clitest.NewNamespace(t)
	deleteJob := func(name string) func(context.Context, client.Client) error {
		return func(ctx context.Context, c client.Client) error {
			return c.Delete(ctx, clitest.TrainingJob(ns, name, 1))
		}
	}
	out := &clitest.SyncBuffer{}
	r := submitWithOperator(t, ns, nil, out, out, []step{
		{do: deleteJob("submitted")},
	}, "submitted", "--image", "example.test/train:1")
	if r.Code != util.ExitFailed || !strings.HasSuffix(r.Err, "\nerror: TrainingJob \"submitted\" was deleted while waiting for it\n") {
		t.Errorf("submit: exit %d, stderr %q, out:\n%s", r.Code, r.Err, r.Out)
	}

	c := clitest.AdminClient(t)
	for name, recreate := range map[string]bool{"deleted": false, "recreated": true} {
		t.Run(name, func(t *testing.T) {
			if err := c.Create(context.Background(), clitest.TrainingJob(ns, name, 1)); err != nil {
				t.Fatal(err)
			}
			steps := []step{{do: func(context.Context, client.Client) error { return nil }, expect: name + ": -\n"}}
			want := "error: TrainingJob \"" + name + "\" was deleted while waiting for it\n"
			if recreate {
				steps = append(steps, step{do: func(ctx context.Context, c client.Client) error {
					if err := deleteJob(name)(ctx, c); err != nil {
						return err
					}
					return c.Create(ctx, clitest.TrainingJob(ns, name, 1))
				}})
				// The CLI may read the job between the deletion and the
				// creation (NotFound) or only after (another uid): both
				// must end the wait the same way, the second naming it.
				want = "error: TrainingJob \"" + name + "\" was deleted while waiting for it"
			} else {
				steps = append(steps, step{do: deleteJob(name)})
			}
			out := &clitest.SyncBuffer{}
			ctx, cancel := context.WithTimeout(context.Background(), testenv.EventuallyTimeout)
			defer cancel()
			opErr := make(chan error, 1)
			go func() { opErr <- fakeOperator(ctx, c, out, steps) }()
			r := clitest.CLI(ctx, t, clitest.Env.Config, ns, func(o *util.Options) {
				o.Streams.ErrOut = io.MultiWriter(out, o.Streams.ErrOut)
				o.PollInterval = time.Second
			}, "train", "wait", name)
			if err := <-opErr; err != nil {
				t.Fatal(err)
			}
			last := r.Err[strings.LastIndex(strings.TrimSuffix(r.Err, "\n"), "\n")+1:]
			if r.Code != util.ExitFailed || !strings.HasPrefix(last, want) || strings.Count(last, "\n") != 1 {
				t.Errorf("wait: exit %d, stderr %q, want %q", r.Code, r.Err, want)
			}
		})
	}
}

// TestFollowClosesItsWatchesWhenItReturns: `train wait` without --timeout
// closes the watches it opened (of the job, its pods and its warnings) once
// the job ended, though the context it was given goes on, as a caller's
// would.
func TestFollowClosesItsWatchesWhenItReturns(t *testing.T) {
	ns := clitest.NewNamespace(t)
	clitest.CreateAll(t, clitest.TrainingJob(ns, "job", 1))
	var watches clitest.Watches
	out := &clitest.SyncBuffer{}
	ctx, cancel := context.WithTimeout(context.Background(), 2*testenv.EventuallyTimeout)
	defer cancel()
	allOpen := func(ctx context.Context, _ client.Client) error {
		for watches.Opened() < 3 {
			select {
			case <-ctx.Done():
				return fmt.Errorf("the follow opened %d watches, not 3", watches.Opened())
			case <-time.After(20 * time.Millisecond):
			}
		}
		return nil
	}
	opErr := make(chan error, 1)
	go func() {
		opErr <- fakeOperator(ctx, clitest.AdminClient(t), out, []step{
			{do: noop, expect: "job: -\n"},
			{do: allOpen},
			{do: jobStatus(ns, "job", succeeded)},
		})
	}()
	r := clitest.CLI(ctx, t, clitest.Env.Config, ns, func(o *util.Options) {
		watches.Count(o)
		o.Streams.ErrOut = io.MultiWriter(out, o.Streams.ErrOut)
	}, "train", "wait", "job")
	if err := <-opErr; err != nil {
		t.Fatal(err)
	}
	if r.Code != util.ExitOK {
		t.Fatalf("exit %d, stderr %q", r.Code, r.Err)
	}
	testenv.Eventually(t, "the follow's watches to be closed", func(context.Context) (bool, error) {
		return watches.Open() == 0, nil
	})
}
