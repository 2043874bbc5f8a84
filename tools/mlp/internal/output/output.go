// Package output prints our objects as kubectl does: cli-runtime's
// printers for the machine formats and for the API server's tables, and
// custom columns.
package output

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/ml-platform/ml-platform/tools/mlp/internal/cmd/util"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/escape"
)

// Output formats mlp adds to those of cli-runtime's PrintFlags (json, yaml,
// name, go-template, jsonpath and their -file variants): the human table,
// its wide form, and kubectl's custom columns.
const (
	outTable         = ""
	outWide          = "wide"
	outCustomColumns = "custom-columns"
)

// Flags are kubectl's output flags: cli-runtime's PrintFlags for the
// machine formats, and the table options of `kubectl get`.
type Flags struct {
	*genericclioptions.PrintFlags
	noHeaders bool
}

// NewFlags are the output flags with a table by default.
func NewFlags() *Flags {
	return &Flags{PrintFlags: genericclioptions.NewPrintFlags("")}
}

// AddFlags adds -o and the template flags; withTable adds --no-headers for
// commands that print tables of several objects.
func (f *Flags) AddFlags(cmd *cobra.Command, withTable bool) {
	f.PrintFlags.AddFlags(cmd)
	formats := f.formats()
	cmd.Flag("output").Usage = "Output format: " + strings.Join(formats, "|") + "; a table when empty"
	_ = cmd.RegisterFlagCompletionFunc("output", f.completeOutput)
	if withTable {
		cmd.Flags().BoolVar(&f.noHeaders, "no-headers", false, "Print tables without their header line")
	}
}

// completeOutput completes -o; the template formats end with "=", which
// their argument follows without a space.
func (f *Flags) completeOutput(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	values := []string{outWide, outCustomColumns + "="}
	values = append(values, f.JSONYamlPrintFlags.AllowedFormats()...)
	values = append(values, f.NamePrintFlags.AllowedFormats()...)
	for _, t := range f.TemplatePrinterFlags.AllowedFormats() {
		values = append(values, t+"=")
	}
	return util.WithPrefix(values, toComplete), cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
}

func (f *Flags) formats() []string {
	return append([]string{outWide, outCustomColumns + "="}, f.AllowedFormats()...)
}

func (f *Flags) format() string { return *f.OutputFormat }

// Human says whether the output is the table, where messages such as
// "created" and "No ... found" belong.
func (f *Flags) Human() bool { return f.format() == outTable || f.format() == outWide }

// Validate refuses an unknown format, a template that does not parse and a
// malformed custom-columns specification before anything is sent.
func (f *Flags) Validate() error {
	_, err := f.ToPrinter()
	return err
}

// ToPrinter builds the printer of the chosen format. A table format
// prints the API server's tables (see ToServerTablePrinter); the commands
// ask the server for them.
func (f *Flags) ToPrinter() (printers.ResourcePrinter, error) {
	format := f.format()
	switch {
	case f.Human():
		return f.ToServerTablePrinter(false), nil
	case strings.HasPrefix(format, outCustomColumns+"="):
		return newCustomColumnsPrinter(strings.TrimPrefix(format, outCustomColumns+"="), f.noHeaders)
	}
	p, err := f.PrintFlags.ToPrinter()
	if genericclioptions.IsNoCompatiblePrinterError(err) {
		return nil, fmt.Errorf("unknown output format %q: use one of %s", format, strings.Join(f.formats(), ", "))
	}
	return p, err
}

// ToServerTablePrinter is cli-runtime's printer of the API server's
// tables (metav1.Table), as kubectl get uses it: --no-headers, the
// priority>0 columns with -o wide, and the NAMESPACE column of
// --all-namespaces (withNamespace). Across the calls of a watch it prints
// the header once. The cells are escaped first (see escapedCells).
func (f *Flags) ToServerTablePrinter(withNamespace bool) printers.ResourcePrinter {
	return escapedTablePrinter{printers.NewTablePrinter(printers.PrintOptions{
		NoHeaders: f.noHeaders, Wide: f.format() == outWide, WithNamespace: withNamespace,
	})}
}

// escapedTablePrinter prints tables with escapedCells.
type escapedTablePrinter struct{ printers.ResourcePrinter }

func (p escapedTablePrinter) PrintObj(obj runtime.Object, w io.Writer) error {
	if t, ok := obj.(*metav1.Table); ok {
		obj = escapedCells(t)
	}
	return p.ResourcePrinter.PrintObj(obj, w)
}

// escapedCells is a copy of t whose text cells have every control
// character escaped: cli-runtime's table printer escapes only ESC and CR.
// A cell ends at its first line break, with "...", as there.
func escapedCells(t *metav1.Table) *metav1.Table {
	out := *t
	out.Rows = make([]metav1.TableRow, len(t.Rows))
	for i, row := range t.Rows {
		row.Cells = slices.Clone(row.Cells)
		for c, cell := range row.Cells {
			s, ok := cell.(string)
			if !ok {
				continue
			}
			if cut := strings.IndexAny(s, "\f\n\r"); cut >= 0 {
				row.Cells[c] = escape.Line(s[:cut]) + "..."
			} else {
				row.Cells[c] = escape.Line(s)
			}
		}
		out.Rows[i] = row
	}
	return &out
}

// PrintOne prints one object in the chosen machine format; the commands
// that call it say what they did in words when the format is a table.
func (f *Flags) PrintOne(u *unstructured.Unstructured, w io.Writer) error {
	p, err := f.ToPrinter()
	if err != nil {
		return err
	}
	return p.PrintObj(u, w)
}

// AsList wraps objects in a kubectl List, which is how list commands print
// in json and yaml even with one item.
func AsList(items []unstructured.Unstructured, resourceVersion string) *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{Items: slices.Clone(items)}
	l.SetAPIVersion("v1")
	l.SetKind("List")
	l.SetResourceVersion(resourceVersion)
	return l
}

// Age formats how long ago t was, as kubectl does; "<unknown>" for zero.
func Age(t, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}

// PhaseInQueue is an object's phase with its place in its Kueue
// LocalQueue while it waits there and the operator knows the place, as
// mlp's list and describe show it for TrainingJobs and Notebooks alike:
// "Queued (position 2 in team-queue)".
func PhaseInQueue(phase, localQueue string, position *int32) string {
	if place := QueuePlace(localQueue, position); place != "" {
		return fmt.Sprintf("%s (%s)", OrDash(phase), place)
	}
	return OrDash(phase)
}

// QueuePlace is a place in a Kueue LocalQueue, such as "position 2 in
// team-queue"; empty when the position is unknown.
func QueuePlace(localQueue string, position *int32) string {
	if position == nil {
		return ""
	}
	return fmt.Sprintf("position %d in %s", *position, localQueue)
}

// OrDash prints "-" for an empty cell, which keeps columns aligned.
func OrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
