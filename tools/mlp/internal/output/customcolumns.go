package output

import (
	"bytes"
	"fmt"
	"io"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/util/jsonpath"

	"github.com/ml-platform/ml-platform/tools/mlp/internal/escape"
)

// customColumnsPrinter prints `-o custom-columns=HEADER:JSONPATH,...` as
// kubectl does: one column per HEADER, each cell the JSONPath's values
// joined by commas with its control characters escaped, "<none>" when it
// finds nothing. cli-runtime has no such
// printer (kubectl keeps its own in k8s.io/kubectl, which this module does
// not depend on), so this is a small one on client-go's JSONPath.
type customColumnsPrinter struct {
	headers   []string
	paths     []*jsonpath.JSONPath
	noHeaders bool
	// printedHeaders keeps a watch from repeating the header line.
	printedHeaders bool
}

func newCustomColumnsPrinter(spec string, noHeaders bool) (*customColumnsPrinter, error) {
	if spec == "" {
		return nil, fmt.Errorf("custom-columns needs a specification, e.g. -o custom-columns=NAME:.metadata.name,PHASE:.status.phase")
	}
	p := &customColumnsPrinter{noHeaders: noHeaders}
	for _, col := range strings.Split(spec, ",") {
		header, path, ok := strings.Cut(col, ":")
		if !ok || header == "" || path == "" {
			return nil, fmt.Errorf("custom-columns column %q is not HEADER:JSONPATH", col)
		}
		jp := jsonpath.New(header).AllowMissingKeys(true)
		if err := jp.Parse(relaxedJSONPath(path)); err != nil {
			return nil, fmt.Errorf("custom-columns column %q: %w", col, err)
		}
		p.headers = append(p.headers, header)
		p.paths = append(p.paths, jp)
	}
	return p, nil
}

// relaxedJSONPath accepts ".status.phase" and "status.phase" as kubectl
// does, besides the braced "{.status.phase}".
func relaxedJSONPath(path string) string {
	if strings.HasPrefix(path, "{") {
		return path
	}
	return "{." + strings.TrimPrefix(path, ".") + "}"
}

func (p *customColumnsPrinter) PrintObj(obj runtime.Object, w io.Writer) error {
	items, err := itemsOf(obj)
	if err != nil {
		return err
	}
	tw := printers.GetNewTabWriter(w)
	if !p.noHeaders && !p.printedHeaders {
		fmt.Fprintln(tw, strings.Join(p.headers, "\t"))
		p.printedHeaders = true
	}
	for i := range items {
		cells := make([]string, len(p.paths))
		for c, jp := range p.paths {
			cells[c], err = p.cell(jp, items[i].Object)
			if err != nil {
				return err
			}
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

func (p *customColumnsPrinter) cell(jp *jsonpath.JSONPath, obj map[string]any) (string, error) {
	results, err := jp.FindResults(obj)
	if err != nil {
		return "", err
	}
	var values []string
	for _, r := range results {
		for _, v := range r {
			var b bytes.Buffer
			if err := jp.PrintResults(&b, []reflect.Value{v}); err != nil {
				return "", err
			}
			values = append(values, b.String())
		}
	}
	if len(values) == 0 {
		return "<none>", nil
	}
	return escape.Line(strings.Join(values, ",")), nil
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
