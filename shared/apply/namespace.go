package apply

import (
	"fmt"
	"strings"
)

// reservedNamespacePrefix marks the cluster's own namespaces (kube-system,
// kube-public, kube-node-lease): the charts' owned-objects policy
// (charts/mlp-lib, _policy.tpl) refuses the operators every write there,
// as a pod template there could run as one of the cluster's own
// ServiceAccounts.
const reservedNamespacePrefix = "kube-"

// NamespaceReserved says why an object of kind in namespace ns can have no
// children, or nil when it can. An operator stalls such an object with
// this error at once: its children's writes would only be refused, and
// its status would say it is creating them.
func NamespaceReserved(kind, ns string) error {
	if !strings.HasPrefix(ns, reservedNamespacePrefix) {
		return nil
	}
	return fmt.Errorf("namespace %s is one of the cluster's own (kube-*), where the platform creates nothing: create the %s in another namespace", ns, kind)
}
