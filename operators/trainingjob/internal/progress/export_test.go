package progress

import (
	"context"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// LoadSecret is one replica's first load of an operator-owned Secret for
// the endpoint at host, as Setup does it for the operator of the chart
// (whose policy admits Secrets labelled for trainingjob-operator); it
// returns the CA it loaded.
func LoadSecret(ctx context.Context, c client.Client, r client.Reader, key types.NamespacedName, host string) (string, error) {
	certs := &certificates{key: key, names: certificateNames(host), generate: true, operator: "trainingjob-operator", client: c, reader: r, log: logr.Discard()}
	if err := certs.load(ctx); err != nil {
		return "", err
	}
	return certs.CA(), nil
}
