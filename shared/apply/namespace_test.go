package apply

import (
	"strings"
	"testing"
)

func TestNamespaceReservedRefusesTheClustersOwn(t *testing.T) {
	for ns, reserved := range map[string]bool{
		"kube-system": true, "kube-public": true, "kube-node-lease": true, "kube-anything": true,
		"team-a": false, "kubeflow": false, "my-kube-system": false, "default": false,
	} {
		err := NamespaceReserved("TrainingJob", ns)
		if (err != nil) != reserved {
			t.Errorf("%s: %v, want reserved %v", ns, err, reserved)
		}
		if err != nil && (!strings.Contains(err.Error(), ns) || !strings.Contains(err.Error(), "create the TrainingJob in another namespace")) {
			t.Errorf("%s: %q names neither the namespace nor the remedy", ns, err)
		}
	}
}
