package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/client"

	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

func createAll(t *testing.T, objs ...client.Object) {
	t.Helper()
	c := adminClient(t)
	for _, o := range objs {
		if err := c.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}

func labelled(tj *trainingv1alpha1.TrainingJob, labels map[string]string) *trainingv1alpha1.TrainingJob {
	tj.Labels = labels
	return tj
}

// TestListPrintsLikeKubectlGet checks the kubectl output options of list
// and get: the template formats of cli-runtime, custom columns, headers
// left out, a selector and every namespace.
func TestListPrintsLikeKubectlGet(t *testing.T) {
	ns, other := newNamespace(t), newNamespace(t)
	createAll(t,
		labelled(trainingJob(ns, "bert", 2), map[string]string{"team": "nlp"}),
		labelled(trainingJob(ns, "mnist", 1), map[string]string{"team": "vision"}),
		labelled(trainingJob(other, "resnet", 4), map[string]string{"team": "vision"}),
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
		"table without headers": {
			args: []string{"train", "list", "--no-headers"},
			want: "bert    pytorch   2     -     -     0     400d   -\nmnist   pytorch   1     -     -     0     400d   -\n",
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
			r := run(t, ns, tc.args...)
			if r.code != 0 || r.err != "" {
				t.Fatalf("exit %d, stderr %q", r.code, r.err)
			}
			if diff := cmp.Diff(tc.want, r.out); diff != "" {
				t.Errorf("output differs (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("all namespaces table", func(t *testing.T) {
		r := run(t, ns, "train", "list", "--all-namespaces", "-l", "team=vision")
		if r.code != 0 {
			t.Fatalf("exit %d, stderr %q", r.code, r.err)
		}
		lines := strings.Split(strings.TrimSpace(r.out), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[0], "NAMESPACE ") || !strings.Contains(r.out, other) || !strings.Contains(r.out, "resnet") {
			t.Errorf("want a NAMESPACE column and the jobs of both namespaces, got:\n%s", r.out)
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
	ns := newNamespace(t)
	for name, tc := range map[string]struct {
		args    []string
		wantErr string
	}{
		"jsonpath that does not parse":    {args: []string{"train", "list", "-o", "jsonpath={.items[}"}, wantErr: "error parsing jsonpath"},
		"custom column without a path":    {args: []string{"notebook", "list", "-o", "custom-columns=NAME"}, wantErr: `custom-columns column "NAME" is not HEADER:JSONPATH`},
		"unknown format names the others": {args: []string{"featurestore", "list", "-o", "xml"}, wantErr: "go-template"},
	} {
		t.Run(name, func(t *testing.T) {
			r := run(t, ns, tc.args...)
			if r.code != ExitFailed || !strings.Contains(r.err, tc.wantErr) {
				t.Errorf("exit %d, stderr %q, want 1 and %q", r.code, r.err, tc.wantErr)
			}
		})
	}
}

// TestListWatchPrintsChanges lists with -w and checks that later creations,
// changes and deletions are printed as they happen, under the one header
// of the list. The poll interval is an hour, so only a watch can see them
// within the test.
func TestListWatchPrintsChanges(t *testing.T) {
	ns := newNamespace(t)
	createAll(t, trainingJob(ns, "first", 1))
	ctx, cancel := context.WithTimeout(context.Background(), testenv.EventuallyTimeout)
	defer cancel()
	out := &syncBuffer{}
	done := make(chan result, 1)
	go func() {
		done <- cli(ctx, t, env.Config, ns, func(o *Options) {
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
	createAll(t, trainingJob(ns, "second", 1))
	waitFor("the created job", "second   <none>")
	setJobStatus(t, adminClient(t), ns, "second", func(st *trainingv1alpha1.TrainingJobStatus) { st.Phase = trainingv1alpha1.PhaseRunning })
	waitFor("the changed job", "second   Running")
	cancel()
	r := <-done
	if r.code != 0 {
		t.Errorf("interrupted watch: exit %d, stderr %q", r.code, r.err)
	}
	if n := strings.Count(out.String(), "NAME"); n != 1 {
		t.Errorf("header printed %d times, want once:\n%s", n, out.String())
	}
}

func notebook(ns, name string) *notebooksv1alpha1.Notebook {
	nb := &notebooksv1alpha1.Notebook{}
	nb.Namespace, nb.Name = ns, name
	return nb
}

// TestNotebookListWatchOnlyAllNamespaces watches Notebooks in every
// namespace without the list first, in the table.
func TestNotebookListWatchOnlyAllNamespaces(t *testing.T) {
	ns, other := newNamespace(t), newNamespace(t)
	createAll(t, notebook(ns, "before"), notebook(other, "after"))
	ctx, cancel := context.WithTimeout(context.Background(), testenv.EventuallyTimeout)
	defer cancel()
	out := &syncBuffer{}
	done := make(chan result, 1)
	go func() {
		done <- cli(ctx, t, env.Config, ns, func(o *Options) { o.Streams.Out = out }, "notebook", "list", "-A", "--watch-only")
	}()
	// Nothing tells the test when the watch is open, so it changes the
	// notebook until a change shows; no change of "before" is made.
	c := adminClient(t)
	i := 0
	testenv.Eventually(t, "the changed notebook", func(ctx context.Context) (bool, error) {
		if strings.Contains(out.String(), "after") {
			return true, nil
		}
		i++
		patch := []byte(`{"metadata":{"annotations":{"test/touch":"` + itoa(i) + `"}}}`)
		return false, c.Patch(ctx, notebook(other, "after"), client.RawPatch("application/merge-patch+json", patch))
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
	ns := newNamespace(t)
	createAll(t, trainingJob(ns, "seen", 1))
	cfg := userWithRules(t, ns, "walter", rule("training.mlplatform.dev", "trainingjobs", "list"))
	ctx, cancel := context.WithTimeout(context.Background(), testenv.EventuallyTimeout)
	defer cancel()
	r := cli(ctx, t, cfg, ns, nil, "train", "list", "-w", "-o", "name")

	if r.code != ExitFailed || r.out != "trainingjob.training.mlplatform.dev/seen\n" {
		t.Errorf("exit %d, stdout %q", r.code, r.out)
	}
	if !strings.Contains(r.err, "you may not watch trainingjobs.training.mlplatform.dev") || strings.Count(strings.TrimSpace(r.err), "\n") != 0 {
		t.Errorf("stderr %q, want one line denying the watch", r.err)
	}
}
