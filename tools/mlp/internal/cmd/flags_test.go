package cmd

import (
	"context"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/cmd/util"
	"github.com/ml-platform/ml-platform/tools/mlp/test/clitest"
)

// TestCarelessFlagsAreRefused refuses every numeric, duration and quantity
// flag that makes no sense with the flag's name, and creates nothing.
func TestCarelessFlagsAreRefused(t *testing.T) {
	ns := clitest.NewNamespace(t)
	submit := []string{"train", "submit", "job", "--image", "i", "--no-wait"}
	nbCreate := []string{"notebook", "create", "nb"}
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"negative gpus":             {append(submit, "--gpus", "-5"), "--gpus must be 0 or more, not -5"},
		"zero workers":              {append(submit, "--workers", "0"), "--workers must be 1 or more, not 0"},
		"negative submit timeout":   {append(submit, "--timeout=-5s"), "--timeout must not be negative, not -5s"},
		"negative cpu":              {append(submit, "--cpu=-1"), "--cpu must be more than 0, not -1"},
		"zero memory":               {append(submit, "--memory", "0"), "--memory must be more than 0, not 0"},
		"unparsable memory":         {append(submit, "--memory", "lots"), `--memory "lots" is not a quantity`},
		"negative checkpoint":       {append(submit, "--checkpoint-size=-10Gi"), "--checkpoint-size must be more than 0, not -10Gi"},
		"negative wait timeout":     {[]string{"train", "wait", "job", "--timeout=-1s"}, "--timeout must not be negative"},
		"negative notebook gpus":    {append(nbCreate, "--gpus", "-1"), "--gpus must be 0 or more, not -1"},
		"negative notebook cpu":     {append(nbCreate, "--cpu=-500m"), "--cpu must be more than 0, not -500m"},
		"negative workspace":        {append(nbCreate, "--workspace=-1Gi"), "--workspace must be more than 0, not -1Gi"},
		"rank below all":            {[]string{"train", "logs", "job", "--rank", "-2"}, "--rank must be -1 or more, not -2"},
		"negative run":              {[]string{"train", "logs", "job", "--run", "-1"}, "--run must be 0 or more, not -1"},
		"port out of range":         {[]string{"notebook", "open", "nb", "--port", "70000"}, "--port must be a port number from 0 (any free port) to 65535, not 70000"},
		"two bad flags, both named": {append(submit, "--gpus", "-1", "--cpu", "0"), "--gpus must be 0 or more, not -1\n--cpu must be more than 0, not 0"},
	} {
		t.Run(name, func(t *testing.T) {
			r := clitest.Run(t, ns, tc.args...)
			if r.Code != util.ExitFailed || !strings.Contains(r.Err, "error: "+tc.want) {
				t.Errorf("exit %d, stderr %q, want %q", r.Code, r.Err, tc.want)
			}
		})
	}
	c := clitest.AdminClient(t)
	var jobs trainingv1alpha1.TrainingJobList
	var notebooks notebooksv1alpha1.NotebookList
	if err := c.List(context.Background(), &jobs, client.InNamespace(ns)); err != nil || len(jobs.Items) != 0 {
		t.Errorf("%d TrainingJobs were created (err %v)", len(jobs.Items), err)
	}
	if err := c.List(context.Background(), &notebooks, client.InNamespace(ns)); err != nil || len(notebooks.Items) != 0 {
		t.Errorf("%d Notebooks were created (err %v)", len(notebooks.Items), err)
	}
}

// TestUnknownSubcommandFails exits 1 for a typo in a command group, which
// printed the group's help and exited 0, and still prints the help for
// the group alone.
func TestUnknownSubcommandFails(t *testing.T) {
	for _, group := range []string{"train", "notebook", "featurestore"} {
		r := clitest.Run(t, "default", group, "sbumit")
		want := `error: unknown command "sbumit" for "mlp ` + group + `"`
		if r.Code != util.ExitFailed || !strings.HasPrefix(r.Err, want) {
			t.Errorf("%s sbumit: exit %d, stderr %q, want %q", group, r.Code, r.Err, want)
		}
		if r := clitest.Run(t, "default", group); r.Code != 0 || !strings.Contains(r.Out, "Available Commands:") {
			t.Errorf("%s alone: exit %d, stdout %q", group, r.Code, r.Out)
		}
	}
}
