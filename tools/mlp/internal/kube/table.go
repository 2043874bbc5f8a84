package kube

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// tableAccept asks the API server for a server-side table, as kubectl get
// does, and for the plain object from a server that cannot make one.
const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"

// tableCodecs decode what a table request returns: the Table, the
// PartialObjectMetadata of each row, and the Status of a failed watch.
var tableCodecs = func() serializer.CodecFactory {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	if err := metav1.AddMetaToScheme(s); err != nil {
		panic(err) // The scheme is static: this is a programming error.
	}
	return serializer.NewCodecFactory(s)
}()

// TableQuery selects the objects a table shows: one by Name, or those of
// Namespace (every namespace when empty) matching Selector.
type TableQuery struct {
	Namespace, Name, Selector string
}

// tableClient talks to kind k's API asking for tables.
func (s *Session) tableClient(k Kind) (*rest.RESTClient, error) {
	cfg := rest.CopyConfig(s.Cfg)
	gv := k.GVK.GroupVersion()
	cfg.GroupVersion = &gv
	cfg.APIPath = "/apis"
	cfg.AcceptContentTypes = tableAccept
	cfg.NegotiatedSerializer = tableCodecs.WithoutConversion()
	return rest.RESTClientFor(cfg)
}

// tableRequest is a request for the table of q. It first asks discovery,
// through the client's RESTMapper, whether kind k is served, as a list
// through the client does: a removed CRD is then a NoMatch error, which
// Explain says as the operator not being installed, and not a 404 that
// reads as a missing object.
func (s *Session) tableRequest(k Kind, q TableQuery) (*rest.Request, error) {
	if _, err := s.C.RESTMapper().RESTMapping(k.GVK.GroupKind(), k.GVK.Version); err != nil {
		return nil, err
	}
	c, err := s.tableClient(k)
	if err != nil {
		return nil, fmt.Errorf("connecting to the cluster: %w", err)
	}
	// The rows carry the objects' metadata, which the NAMESPACE column of
	// --all-namespaces reads.
	r := c.Get().NamespaceIfScoped(q.Namespace, q.Namespace != "").Resource(k.Resource).Param("includeObject", string(metav1.IncludeMetadata))
	if q.Name != "" {
		r = r.Name(q.Name)
	}
	return r, nil
}

// Table is the API server's table of the objects of kind k that q
// selects: the columns are the CRD's printer columns, in their order.
func (s *Session) Table(ctx context.Context, k Kind, q TableQuery) (*metav1.Table, error) {
	verb := "list"
	if q.Name != "" {
		verb = "get"
	}
	r, err := s.tableRequest(k, q)
	if err != nil {
		return nil, Explain(err, k, verb, q.Name, q.Namespace)
	}
	obj, err := r.Param("labelSelector", q.Selector).Do(ctx).Get()
	if err != nil {
		return nil, Explain(err, k, verb, q.Name, q.Namespace)
	}
	return asTable(obj)
}

// WatchTable watches the objects q selects from resourceVersion on; each
// event carries a one-row Table. Bookmarks are not asked for: they carry
// no row to print.
func (s *Session) WatchTable(ctx context.Context, k Kind, q TableQuery, opts metav1.ListOptions) (apiwatch.Interface, error) {
	r, err := s.tableRequest(k, q)
	if err != nil {
		return nil, err
	}
	opts.LabelSelector = q.Selector
	opts.AllowWatchBookmarks = false
	opts.Watch = true
	w, err := r.VersionedParams(&opts, metav1.ParameterCodec).Watch(ctx)
	if err != nil {
		return nil, err
	}
	return apiwatch.Filter(w, func(ev apiwatch.Event) (apiwatch.Event, bool) {
		if t, ok := ev.Object.(*metav1.Table); ok {
			if err := decodeRows(t); err != nil {
				return apiwatch.Event{Type: apiwatch.Error, Object: &metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}}, true
			}
		}
		return ev, true
	}), nil
}

// asTable is the Table the server answered, with each row's object
// decoded; anything else means the server could not make a table.
func asTable(obj runtime.Object) (*metav1.Table, error) {
	t, ok := obj.(*metav1.Table)
	if !ok {
		return nil, fmt.Errorf("the API server answered a %T where a Table was asked for", obj)
	}
	return t, decodeRows(t)
}

// decodeRows decodes the metadata each row carries, which the table
// printer reads for the NAMESPACE column.
func decodeRows(t *metav1.Table) error {
	for i := range t.Rows {
		o := &t.Rows[i].Object
		if o.Object != nil || len(o.Raw) == 0 {
			continue
		}
		obj, err := runtime.Decode(tableCodecs.UniversalDeserializer(), o.Raw)
		if err != nil {
			return fmt.Errorf("decoding a row of the API server's table: %w", err)
		}
		o.Object = obj
	}
	return nil
}
