package v1alpha1

// LabelManagedBy marks the objects an operator creates, with the operator's
// name as value. The manager's cache of every kind an operator owns sees
// only objects labelled with its name, shared/apply refuses to write an
// object another operator manages, and the charts' admission policy keeps
// an operator's writes to objects with its label; so reconcilers set it on
// everything they create. It lives with the API types so that every
// library can use it without importing the manager's bootstrap package.
const LabelManagedBy = "app.kubernetes.io/managed-by"
