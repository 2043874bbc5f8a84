package cmd

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/testenv"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/cmd/util"
	"github.com/ml-platform/ml-platform/tools/mlp/test/clitest"
)

func labelled(tj *trainingv1alpha1.TrainingJob, labels map[string]string) *trainingv1alpha1.TrainingJob {
	tj.Labels = labels
	return tj
}

// TestListPrintsLikeKubectlGet checks the kubectl output options of list
// and get: the template formats of cli-runtime, custom columns, headers
// left out, a selector and every namespace.
func TestListPrintsLikeKubectlGet(t *testing.T) {
	ns, other := clitest.NewNamespace(t), clitest.NewNamespace(t)
	clitest.CreateAll(t,
		labelled(clitest.TrainingJob(ns, "bert", 2), map[string]string{"team": "nlp"}),
		labelled(clitest.TrainingJob(ns, "mnist", 1), map[string]string{"team": "vision"}),
		labelled(clitest.TrainingJob(other, "resnet", 4), map[string]string{"team": "vision"}),
	)
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"jsonpath over the list": {
			args: []string{"train", "list", "-o", "jsonpath={range .items[*]}{.metadata.name}={.spec.workers}{\"\\n\"}{end}"},
			want: "bert=2\nmnist=1\n",
		},
		"jsonpath of one object": {
			args: []string{"train", "get", "bert", "-o", "jsonpath={.spec.framework}"},
			want: "pytorch",
		},
		"go-template": {
			args: []string{"train", "list", "-o", "go-template={{range .items}}{{.metadata.name}} {{end}}"},
			want: "bert mnist ",
		},
		"custom columns, one missing": {
			args: []string{"train", "list", "-o", "custom-columns=NAME:.metadata.name,WORKERS:.spec.workers,QUEUE:.spec.queueName"},
			want: "NAME    WORKERS   QUEUE\nbert    2         <none>\nmnist   1         <none>\n",
		},
		"custom columns without headers": {
			args: []string{"train", "list", "--no-headers", "-o", "custom-columns=NAME:metadata.name"},
			want: "bert\nmnist\n",
		},
		"selector": {
			args: []string{"train", "list", "-l", "team=vision", "-o", "name"},
			want: "trainingjob.training.mlplatform.dev/mnist\n",
		},
		"all namespaces with a selector add the NAMESPACE column": {
			args: []string{"train", "list", "-A", "-l", "team=vision", "-o", "custom-columns=NS:.metadata.namespace,NAME:.metadata.name", "--no-headers"},
			want: strings.Join(sortedLines(ns+"   mnist", other+"   resnet"), "\n") + "\n",
		},
	} {
		t.Run(name, func(t *testing.T) {
			r := clitest.Run(t, ns, tc.args...)
			if r.Code != 0 || r.Err != "" {
				t.Fatalf("exit %d, stderr %q", r.Code, r.Err)
			}
			if diff := cmp.Diff(tc.want, r.Out); diff != "" {
				t.Errorf("output differs (-want +got):\n%s", diff)
			}
		})
	}

	// The API server computes the ages, from its clock: the rows are
	// compared up to the AGE column.
	t.Run("table without headers", func(t *testing.T) {
		r := clitest.Run(t, ns, "train", "list", "--no-headers")
		if r.Code != 0 || r.Err != "" {
			t.Fatalf("exit %d, stderr %q", r.Code, r.Err)
		}
		lines := strings.Split(strings.TrimSuffix(r.Out, "\n"), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "bert    pytorch   2   ") || !strings.HasPrefix(lines[1], "mnist   pytorch   1   ") {
			t.Errorf("want the two rows without the header, got:\n%s", r.Out)
		}
	})

	t.Run("all namespaces table", func(t *testing.T) {
		r := clitest.Run(t, ns, "train", "list", "--all-namespaces", "-l", "team=vision")
		if r.Code != 0 {
			t.Fatalf("exit %d, stderr %q", r.Code, r.Err)
		}
		lines := strings.Split(strings.TrimSpace(r.Out), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[0], "NAMESPACE ") || !strings.Contains(r.Out, other) || !strings.Contains(r.Out, "resnet") {
			t.Errorf("want a NAMESPACE column and the jobs of both namespaces, got:\n%s", r.Out)
		}
	})
}

func sortedLines(lines ...string) []string {
	if lines[0] > lines[1] {
		lines[0], lines[1] = lines[1], lines[0]
	}
	return lines
}

func TestPrintFlagErrors(t *testing.T) {
	ns := clitest.NewNamespace(t)
	for name, tc := range map[string]struct {
		args    []string
		wantErr string
	}{
		"jsonpath that does not parse":    {args: []string{"train", "list", "-o", "jsonpath={.items[}"}, wantErr: "error parsing jsonpath"},
		"custom column without a path":    {args: []string{"notebook", "list", "-o", "custom-columns=NAME"}, wantErr: `custom-columns column "NAME" is not HEADER:JSONPATH`},
		"unknown format names the others": {args: []string{"featurestore", "list", "-o", "xml"}, wantErr: "go-template"},
	} {
		t.Run(name, func(t *testing.T) {
			r := clitest.Run(t, ns, tc.args...)
			if r.Code != util.ExitFailed || !strings.Contains(r.Err, tc.wantErr) {
				t.Errorf("exit %d, stderr %q, want 1 and %q", r.Code, r.Err, tc.wantErr)
			}
		})
	}
}

// TestListWatchPrintsChanges lists with -w and checks that later creations,
// changes and deletions are printed as they happen, under the one header
// of the list. The poll interval is an hour, so only a watch can see them
// within the test.
func TestListWatchPrintsChanges(t *testing.T) {
	ns := clitest.NewNamespace(t)
	clitest.CreateAll(t, clitest.TrainingJob(ns, "first", 1))
	ctx, cancel := context.WithTimeout(context.Background(), testenv.EventuallyTimeout)
	defer cancel()
	out := &clitest.SyncBuffer{}
	done := make(chan clitest.Result, 1)
	go func() {
		done <- clitest.CLI(ctx, t, clitest.Env.Config, ns, func(o *util.Options) {
			o.Streams.Out = out
			o.PollInterval = time.Hour
		}, "train", "list", "-w", "-o", "custom-columns=NAME:.metadata.name,PHASE:.status.phase")
	}()
	waitFor := func(what, want string) {
		t.Helper()
		testenv.Eventually(t, what, func(context.Context) (bool, error) {
			return strings.Contains(out.String(), want), nil
		})
	}
	waitFor("the list", "first")
	clitest.CreateAll(t, clitest.TrainingJob(ns, "second", 1))
	waitFor("the created job", "second   <none>")
	clitest.SetJobStatus(t, clitest.AdminClient(t), ns, "second", func(st *trainingv1alpha1.TrainingJobStatus) { st.Phase = trainingv1alpha1.PhaseRunning })
	waitFor("the changed job", "second   Running")
	cancel()
	r := <-done
	if r.Code != 0 {
		t.Errorf("interrupted watch: exit %d, stderr %q", r.Code, r.Err)
	}
	if n := strings.Count(out.String(), "NAME"); n != 1 {
		t.Errorf("header printed %d times, want once:\n%s", n, out.String())
	}
}

// TestListWatchPrintsServerTableRows lists with -w in the table: the
// watch asks the API server for tables too, so every change prints as a
// row of the CRD's printer columns under the list's one header.
func TestListWatchPrintsServerTableRows(t *testing.T) {
	ns := clitest.NewNamespace(t)
	clitest.CreateAll(t, clitest.TrainingJob(ns, "first", 1))
	ctx, cancel := context.WithTimeout(context.Background(), testenv.EventuallyTimeout)
	defer cancel()
	out := &clitest.SyncBuffer{}
	done := make(chan clitest.Result, 1)
	go func() {
		done <- clitest.CLI(ctx, t, clitest.Env.Config, ns, func(o *util.Options) {
			o.Streams.Out = out
			o.PollInterval = time.Hour
		}, "train", "list", "-w")
	}()
	// Each change is a table of its own, aligned on its own as kubectl
	// get -w prints it: its cells are read as words (BACKEND is empty, the
	// age follows STATUS).
	running := func(context.Context) (bool, error) {
		for _, l := range strings.Split(out.String(), "\n") {
			if strings.HasPrefix(strings.Join(strings.Fields(l), " "), "second pytorch 3 Running ") {
				return true, nil
			}
		}
		return false, nil
	}
	testenv.Eventually(t, "the list", func(context.Context) (bool, error) { return strings.Contains(out.String(), "first"), nil })
	clitest.CreateAll(t, clitest.TrainingJob(ns, "second", 3))
	clitest.SetJobStatus(t, clitest.AdminClient(t), ns, "second", func(st *trainingv1alpha1.TrainingJobStatus) { st.Phase = trainingv1alpha1.PhaseRunning })
	testenv.Eventually(t, "the changed job's row", running)
	cancel()
	if r := <-done; r.Code != 0 {
		t.Errorf("interrupted watch: exit %d, stderr %q", r.Code, r.Err)
	}
	want := headers(printerColumns(t, filepath.Join(testenv.RepoRoot(), "charts", trainingJobCRD)), false)
	if diff := cmp.Diff(want, headerOf(out.String())); diff != "" {
		t.Errorf("the header is not the CRD's printer columns (-crd +mlp):\n%s", diff)
	}
	if n := strings.Count(out.String(), "FRAMEWORK"); n != 1 {
		t.Errorf("header printed %d times, want once:\n%s", n, out.String())
	}
}

// TestNotebookListWatchOnlyAllNamespaces watches Notebooks in every
// namespace without the list first, in the table.
func TestNotebookListWatchOnlyAllNamespaces(t *testing.T) {
	ns, other := clitest.NewNamespace(t), clitest.NewNamespace(t)
	clitest.CreateAll(t, clitest.Notebook(ns, "before"), clitest.Notebook(other, "after"))
	ctx, cancel := context.WithTimeout(context.Background(), testenv.EventuallyTimeout)
	defer cancel()
	out := &clitest.SyncBuffer{}
	done := make(chan clitest.Result, 1)
	go func() {
		done <- clitest.CLI(ctx, t, clitest.Env.Config, ns, func(o *util.Options) { o.Streams.Out = out }, "notebook", "list", "-A", "--watch-only")
	}()
	// Nothing tells the test when the watch is open, so it changes the
	// notebook until a change shows; no change of "before" is made.
	c := clitest.AdminClient(t)
	i := 0
	testenv.Eventually(t, "the changed notebook", func(ctx context.Context) (bool, error) {
		if strings.Contains(out.String(), "after") {
			return true, nil
		}
		i++
		patch := []byte(`{"metadata":{"annotations":{"test/touch":"` + strconv.Itoa(i) + `"}}}`)
		return false, c.Patch(ctx, clitest.Notebook(other, "after"), client.RawPatch("application/merge-patch+json", patch))
	})
	cancel()
	<-done
	if strings.Contains(out.String(), "before") || !strings.HasPrefix(out.String(), "NAMESPACE ") || !strings.Contains(out.String(), other) {
		t.Errorf("--watch-only printed the list, or lacks the NAMESPACE column:\n%s", out.String())
	}
}

// TestListWatchDeniedSaysSoOnce: a user who may list but not watch gets
// the list, then one permission error naming the verb, and exit 1.
func TestListWatchDeniedSaysSoOnce(t *testing.T) {
	ns := clitest.NewNamespace(t)
	clitest.CreateAll(t, clitest.TrainingJob(ns, "seen", 1))
	cfg := clitest.UserWithRules(t, ns, "walter", clitest.Rule("training.mlplatform.dev", "trainingjobs", "list"))
	ctx, cancel := context.WithTimeout(context.Background(), testenv.EventuallyTimeout)
	defer cancel()
	r := clitest.CLI(ctx, t, cfg, ns, nil, "train", "list", "-w", "-o", "name")

	if r.Code != util.ExitFailed || r.Out != "trainingjob.training.mlplatform.dev/seen\n" {
		t.Errorf("exit %d, stdout %q", r.Code, r.Out)
	}
	if !strings.Contains(r.Err, "you may not watch trainingjobs.training.mlplatform.dev") || strings.Count(strings.TrimSpace(r.Err), "\n") != 0 {
		t.Errorf("stderr %q, want one line denying the watch", r.Err)
	}
}
