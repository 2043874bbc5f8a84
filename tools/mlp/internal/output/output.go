// Package output prints our objects as kubectl does: cli-runtime's
// printers for the machine formats and for the API server's tables, and
// custom columns. Only an object that may not exist on the server (one
// just built for a client dry run) prints as a table built here.
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
)

// Output formats mlp adds to those of cli-runtime's PrintFlags (json, yaml,
// name, go-template, jsonpath and their -file variants): the human table,
// its wide form, and kubectl's custom columns.
const (
	outTable         = ""
	outWide          = "wide"
	outCustomColumns = "custom-columns"
)

// Table is how one kind prints as rows on the client, for the one object
// a create command shows. The wide columns come after the others, as
// kubectl's priority-1 columns do.
type Table struct {
	Headers func(wide bool) []string
	Row     func(u *unstructured.Unstructured, wide bool, now time.Time) []string
}

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
	_, err := f.ToPrinter(Table{}, false, time.Now)
	return err
}

// ToPrinter builds the printer of the chosen format. The table printer is
// cli-runtime's, fed with tables built on the client from t; withNamespace
// adds the NAMESPACE column of --all-namespaces.
func (f *Flags) ToPrinter(t Table, withNamespace bool, now func() time.Time) (printers.ResourcePrinter, error) {
	format := f.format()
	switch {
	case f.Human():
		return &tablePrinter{table: t, now: now, human: f.ToServerTablePrinter(withNamespace)}, nil
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
// the header once.
func (f *Flags) ToServerTablePrinter(withNamespace bool) printers.ResourcePrinter {
	return printers.NewTablePrinter(printers.PrintOptions{
		NoHeaders: f.noHeaders, Wide: f.format() == outWide, WithNamespace: withNamespace,
	})
}

// PrintOne prints one object in the chosen format.
func (f *Flags) PrintOne(u *unstructured.Unstructured, t Table, now func() time.Time, w io.Writer) error {
	p, err := f.ToPrinter(t, false, now)
	if err != nil {
		return err
	}
	return p.PrintObj(u, w)
}

// tablePrinter prints our objects as kubectl prints a server-side table:
// through cli-runtime's table printer, which handles --no-headers, the
// wide columns, the NAMESPACE column and, across the calls of a watch,
// prints the header once.
type tablePrinter struct {
	table Table
	now   func() time.Time
	human printers.ResourcePrinter
}

func (p *tablePrinter) PrintObj(obj runtime.Object, w io.Writer) error {
	items, err := itemsOf(obj)
	if err != nil {
		return err
	}
	return p.human.PrintObj(p.toTable(items), w)
}

func (p *tablePrinter) toTable(items []unstructured.Unstructured) *metav1.Table {
	narrow := len(p.table.Headers(false))
	tbl := &metav1.Table{}
	for i, h := range p.table.Headers(true) {
		col := metav1.TableColumnDefinition{Name: h, Type: "string"}
		if i >= narrow {
			col.Priority = 1
		}
		tbl.ColumnDefinitions = append(tbl.ColumnDefinitions, col)
	}
	now := p.now()
	for i := range items {
		row := p.table.Row(&items[i], true, now)
		cells := make([]any, len(tbl.ColumnDefinitions))
		for c := range cells {
			cells[c] = ""
			if c < len(row) {
				cells[c] = row[c]
			}
		}
		tbl.Rows = append(tbl.Rows, metav1.TableRow{Cells: cells, Object: runtime.RawExtension{Object: &items[i]}})
	}
	return tbl
}

// itemsOf is the object, or the items of a list.
func itemsOf(obj runtime.Object) ([]unstructured.Unstructured, error) {
	switch o := obj.(type) {
	case *unstructured.UnstructuredList:
		return o.Items, nil
	case *unstructured.Unstructured:
		return []unstructured.Unstructured{*o}, nil
	}
	return nil, fmt.Errorf("cannot print %T as a table", obj)
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

// OrDash prints "-" for an empty cell, which keeps columns aligned.
func OrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
