package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/yaml"
)

// Output formats of -o.
const (
	outTable = "table"
	outWide  = "wide"
	outJSON  = "json"
	outYAML  = "yaml"
	outName  = "name"
)

var outputFormats = []string{outTable, outWide, outJSON, outYAML, outName}

// table is how one kind prints as rows.
type table struct {
	headers func(wide bool) []string
	row     func(u *unstructured.Unstructured, wide bool, now time.Time) []string
}

func addOutputFlag(cmd *cobra.Command, out *string) {
	cmd.Flags().StringVarP(out, "output", "o", outTable, "Output format: "+strings.Join(outputFormats, "|"))
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(outputFormats, cobra.ShellCompDirectiveNoFileComp))
}

func checkOutput(format string) error {
	for _, f := range outputFormats {
		if f == format {
			return nil
		}
	}
	return fmt.Errorf("unknown output format %q: use one of %s", format, strings.Join(outputFormats, ", "))
}

// printObjects prints objects in the chosen format. A list (from list
// commands) prints as a kubectl List in json and yaml even with one item, a
// single object (from get NAME) as the object itself.
func printObjects(w io.Writer, format string, k kind, t table, objs []unstructured.Unstructured, single bool, now time.Time) error {
	switch format {
	case outJSON, outYAML:
		var v any
		if single && len(objs) == 1 {
			v = clean(objs[0])
		} else {
			items := make([]any, 0, len(objs))
			for _, o := range objs {
				items = append(items, clean(o))
			}
			v = map[string]any{"apiVersion": "v1", "kind": "List", "items": items, "metadata": map[string]any{"resourceVersion": ""}}
		}
		return encode(w, format, v)
	case outName:
		for _, o := range objs {
			fmt.Fprintf(w, "%s.%s/%s\n", strings.ToLower(k.GVK.Kind), k.GVK.Group, o.GetName())
		}
		return nil
	}
	if len(objs) == 0 {
		return nil
	}
	wide := format == outWide
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, strings.Join(t.headers(wide), "\t"))
	for i := range objs {
		fmt.Fprintln(tw, strings.Join(t.row(&objs[i], wide, now), "\t"))
	}
	return tw.Flush()
}

func encode(w io.Writer, format string, v any) error {
	if format == outJSON {
		b, err := json.MarshalIndent(v, "", "    ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(w, string(b))
		return err
	}
	b, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// clean drops managedFields, which kubectl hides too: they are noise for
// users.
func clean(u unstructured.Unstructured) map[string]any {
	c := u.DeepCopy()
	c.SetManagedFields(nil)
	return c.Object
}

// age formats how long ago t was, as kubectl does; "<unknown>" for zero.
func age(t, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}

// orDash prints "-" for an empty cell, which keeps columns aligned.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
